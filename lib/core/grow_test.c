/*
 * grow_test.c - tb_grow doubles an array when it is full, and only then.
 *
 * Run: bazel test //lib/core:grow_test
 */
#include "lib/core/grow.h"

#include "lib/core/testing.h"

int main(void)
{
    int *a = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 100; i++) {
        int *p = tb_grow(a, &cap, n, sizeof *a, 4);
        CHECK(p != NULL, "room for element %d", i);
        if (!p)
            break;
        a = p;
        a[n++] = i;
    }
    CHECK(cap == 128, "4 doubled five times holds 100 (cap %zu)", cap);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= a[i] == (int)i;
    CHECK(ok && n == 100, "the elements survive every move");
    CHECK(tb_grow(a, &cap, 100, sizeof *a, 4) == a && cap == 128, "not full: no realloc");
    free(a);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
