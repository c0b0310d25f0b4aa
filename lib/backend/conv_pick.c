/*
 * conv_pick.c - the choice of a convolution algorithm among candidates
 * (conv_pick.h).
 *
 * Test: bazel test //lib/backend:conv_pick_test
 */
#include "lib/backend/conv_pick.h"

int tb_conv_allowed(const tb_conv_candidate *c, int want_deterministic)
{
    return c->ok && (!want_deterministic || c->deterministic);
}

int tb_conv_pick(const tb_conv_candidate *c, int n, int want_deterministic)
{
    for (int i = 0; i < n; i++)
        if (tb_conv_allowed(&c[i], want_deterministic))
            return i;
    return -1;
}
