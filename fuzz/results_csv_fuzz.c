/*
 * results_csv_fuzz.c - fuzz target for the results CSV reader
 * (lib/report/results.h), which the report, bench:compare and --resume use
 * to read every <technique>.csv of a results folder.
 *
 * The input is a CSV file. A crash, a sanitizer report, or a broken contract
 * aborts:
 *   - on success the rows written back (tb_results_write_csv) and read again
 *     are as many and write back to the same bytes: rewriting a CSV changes
 *     nothing (results.h); the same rows as JSON (tb_results_write_json) are
 *     a document that lib/core/json.h reads;
 *   - on failure the error chain says why.
 * Fuzz: tools/fuzz.sh results_csv. Replayed on its corpus and past crashes by
 * bazel test //fuzz:results_csv_replay_test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/json.h"
#include "lib/core/status.h"
#include "lib/report/results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "results_csv_fuzz: broken contract: %s\n", what);
        abort();
    }
}

/* res written by write (CSV or JSON) into a malloc'ed buffer. */
static char *write_mem(const tb_results *res, int (*write)(const tb_results *, FILE *),
                       size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    must(f != NULL, "a memory stream");
    must(write(res, f) == TB_OK, "rows read back can be written");
    must(fclose(f) == 0, "closing a memory stream");
    return buf;
}

static int parse_mem(const char *buf, size_t len, tb_results *res)
{
    FILE *f = fmemopen((void *)buf, len ? len : 1, "rb");
    must(f != NULL, "a memory stream");
    if (len == 0)
        fgetc(f); /* fmemopen needs one byte; read it so the stream is empty */
    int rc = tb_results_parse_csv(f, "fuzz.csv", res);
    fclose(f);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tb_results first, second;
    tb_results_init(&first);
    tb_results_init(&second);
    tb_error_clear();
    if (parse_mem((const char *)data, size, &first) != TB_OK) {
        must(tb_error_message()[0] != '\0', "a failure says why");
        goto out;
    }
    size_t len1 = 0, len2 = 0, jlen = 0;
    char *csv1 = write_mem(&first, tb_results_write_csv, &len1);
    must(parse_mem(csv1, len1, &second) == TB_OK, "a written CSV reads back");
    must(second.n == first.n, "as many rows read back");
    char *csv2 = write_mem(&second, tb_results_write_csv, &len2);
    must(len1 == len2 && !memcmp(csv1, csv2, len1), "rewriting a CSV changes nothing");
    char *json = write_mem(&first, tb_results_write_json, &jlen);
    tb_json *root = NULL;
    must(tb_json_parse(json, jlen, 0, &root) == TB_OK, "the rows' JSON is valid JSON");
    tb_json_free(root);
    free(json);
    free(csv2);
    free(csv1);
out:
    tb_error_clear();
    tb_results_free(&second);
    tb_results_free(&first);
    return 0;
}
