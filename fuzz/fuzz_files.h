/*
 * fuzz_files.h - the scratch folder and files of fuzz targets whose code
 * under test reads a path rather than a buffer (the IDX reader, the run
 * state, the fingerprint).
 *
 * One folder per process under $TMPDIR (else /tmp), made on first use and
 * removed at exit; each input overwrites the same files, so a long run leaves
 * nothing behind and does not fill the disk. Any failure here is the
 * machine's, not the input's: it aborts, and libFuzzer reports it.
 * Tested by every fuzz target's replay test (bazel test //fuzz:all).
 */
#ifndef TB_FUZZ_FILES_H
#define TB_FUZZ_FILES_H

#include <stddef.h>
#include <stdint.h>

/* The process's scratch folder, made on the first call. */
const char *tb_fuzz_dir(void);

/* Writes data[0..n) to tb_fuzz_dir()/name (replacing it) and returns the
 * full path in a static buffer that the next call reuses. */
const char *tb_fuzz_write(const char *name, const uint8_t *data, size_t n);

#endif
