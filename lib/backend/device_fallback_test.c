/*
 * device_fallback_test.c - --device=auto falls back to the CPU with one line
 * saying why, and an explicit cuda request fails with TB_ERR_NO_DEVICE
 * (exit code 2 in bench/). Built with the CUDA backend linked where the
 * toolkit exists, so on a machine without a driver this exercises the real
 * "no driver" answer of the CUDA runtime; on a GPU machine it checks that
 * auto picks the GPU instead.   bazel test //lib/backend:device_fallback_test
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/core/testing.h"

/* Runs tb_backend_open(AUTO) with stderr captured into buf. */
static int open_auto_capturing(tb_backend **be, char *buf, size_t cap)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    int rc = tb_backend_open(TB_DEVICE_AUTO, 0, 1, be);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, cap - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return rc;
}

int main(void)
{
    const char *why = NULL;
    int count = tb_cuda_device_count(&why);
    printf("built with CUDA: %d; usable devices: %d (%s)\n", tb_cuda_built(), count,
           why ? why : "");

    tb_backend *be = NULL;
    char captured[1024];
    int rc = open_auto_capturing(&be, captured, sizeof captured);
    CHECK(rc == TB_OK && be, "auto opens something");
    if (count == 0) {
        CHECK(be && strcmp(be->name, "cpu") == 0, "auto falls back to the CPU");
        int lines = 0;
        for (char *p = captured; *p; p++)
            lines += *p == '\n';
        CHECK(lines == 1, "exactly one line on stderr, got %d: %s", lines, captured);
        CHECK(strstr(captured, "using the CPU backend") != NULL, "the line says so: %s", captured);
        CHECK(why && strlen(why) > 10 && strstr(captured, why) != NULL,
              "the line says why: %s", captured);
    } else {
        CHECK(be && strcmp(be->name, "cuda") == 0, "auto picks the GPU when there is one");
    }
    tb_backend_close(be);

    be = NULL;
    rc = tb_backend_open(TB_DEVICE_CUDA, 0, 1, &be);
    if (count == 0) {
        CHECK(rc == TB_ERR_NO_DEVICE && be == NULL, "cuda without a device fails (rc %d)", rc);
        CHECK(tb_exit_code(rc) == 2, "exit code 2");
        CHECK(strstr(tb_error_message(), "--device=cpu") != NULL,
              "the error says what to do: %s", tb_error_message());
        tb_error_print(stdout);
        tb_error_clear();
    } else {
        CHECK(rc == TB_OK && be && strcmp(be->name, "cuda") == 0, "cuda opens");
        tb_backend_close(be);
    }

    be = NULL;
    rc = tb_backend_open(TB_DEVICE_CUDA, 99, 1, &be);
    CHECK(rc == TB_ERR_NO_DEVICE && be == NULL, "cuda:99 fails (rc %d)", rc);
    tb_error_clear();

    CHECK(tb_backend_open(TB_DEVICE_CPU, 0, 1, &be) == TB_OK && strcmp(be->name, "cpu") == 0,
          "cpu always opens");
    tb_backend_close(be);
    printf("%s\n", failures ? "FAILED" : "all device fallback checks passed");
    return failures != 0;
}
