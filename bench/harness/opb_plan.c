/* opb_plan.c - see opb_plan.h. */
#include "bench/harness/opb_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/status.h"

/* "gelu_fwd_unfused/1024" -> "gelu_fwd_unfused_again/1024": the suffix goes
 * before the first '/', so that looking the base up by its prefix
 * ("gelu_fwd_unfused/") never finds its copy. */
static char *again_name(const char *name)
{
    size_t n = strlen(name), head = strcspn(name, "/");
    char *s = malloc(n + sizeof "_again");
    if (!s)
        return NULL;
    memcpy(s, name, head);
    memcpy(s + head, "_again", 6);
    memcpy(s + head + 6, name + head, n - head + 1);
    return s;
}

static int check_cases(const opb_plan_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t b = cases[i].base;
        if (b >= n)
            return TB_FAIL(TB_ERR_INVALID, "case %s: base %zu out of range (%zu cases)",
                           cases[i].name, b, n);
        if (b == i && cases[i].aa)
            return TB_FAIL(TB_ERR_INVALID, "case %s: an A/A copy of itself", cases[i].name);
        if (b != i && cases[b].base != b)
            return TB_FAIL(TB_ERR_INVALID, "case %s is compared with %s, which is not a "
                           "baseline", cases[i].name, cases[b].name);
        if (!cases[i].aa)
            continue;
        for (size_t j = 0; j < i; j++)
            if (cases[j].aa && cases[j].base == b)
                return TB_FAIL(TB_ERR_INVALID, "%s has two A/A copies: %s and %s",
                               cases[b].name, cases[j].name, cases[i].name);
    }
    return TB_OK;
}

/* Whether baseline case b needs an A/A arm made for it: it has variants and
 * no registered copy. */
static int needs_aa(const opb_plan_case *cases, size_t n, size_t b)
{
    int variants = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == b || cases[i].base != b)
            continue;
        if (cases[i].aa)
            return 0;
        variants = 1;
    }
    return variants;
}

static int alloc_plan(opb_plan *p, size_t n_cases, int n_arms)
{
    /* At least one of each, so that an empty sweep is not "out of memory". */
    size_t na = n_arms > 0 ? (size_t)n_arms : 1, nc = n_cases > 0 ? n_cases : 1;
    p->arms = calloc(na, sizeof *p->arms);
    p->case_of_arm = calloc(na, sizeof *p->case_of_arm);
    p->names = calloc(na, sizeof *p->names);
    p->arm_of_case = calloc(nc, sizeof *p->arm_of_case);
    p->n_arms = n_arms;
    p->n_cases = n_cases;
    if (!p->arms || !p->case_of_arm || !p->names || !p->arm_of_case)
        return TB_FAIL(TB_ERR_NOMEM, "out of memory planning %d arms", n_arms);
    return TB_OK;
}

int opb_plan_build(const opb_plan_case *cases, size_t n_cases, opb_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    TB_TRY(check_cases(cases, n_cases));
    int extra = 0;
    for (size_t i = 0; i < n_cases; i++)
        extra += cases[i].base == i && needs_aa(cases, n_cases, i);
    int rc;
    TB_TRY_GOTO(rc, alloc_plan(plan, n_cases, (int)n_cases + extra), out_free);
    /* Case arms first, in registration order, so arm i is case i. */
    for (size_t i = 0; i < n_cases; i++) {
        plan->names[i] = strdup(cases[i].name);
        if (!plan->names[i]) {
            rc = TB_FAIL(TB_ERR_NOMEM, "out of memory");
            goto out_free;
        }
        plan->case_of_arm[i] = i;
        plan->arm_of_case[i] = (int)i;
        plan->arms[i] = (tb_arm){.name = plan->names[i], .base = (int)cases[i].base,
                                 .aa = cases[i].aa};
    }
    int a = (int)n_cases;
    for (size_t i = 0; i < n_cases; i++) {
        if (cases[i].base != i || !needs_aa(cases, n_cases, i))
            continue;
        plan->names[a] = again_name(cases[i].name);
        if (!plan->names[a]) {
            rc = TB_FAIL(TB_ERR_NOMEM, "out of memory");
            goto out_free;
        }
        plan->case_of_arm[a] = i;
        plan->arms[a] = (tb_arm){.name = plan->names[a], .base = (int)i, .aa = 1};
        a++;
    }
    return TB_OK;
out_free:
    opb_plan_free(plan);
    return rc;
}

void opb_plan_free(opb_plan *plan)
{
    if (plan->names)
        for (int i = 0; i < plan->n_arms; i++)
            free(plan->names[i]);
    free(plan->names);
    free(plan->arms);
    free(plan->case_of_arm);
    free(plan->arm_of_case);
    memset(plan, 0, sizeof *plan);
}

int opb_plan_aa_arm(const opb_plan *plan, int base_arm)
{
    for (int i = 0; i < plan->n_arms; i++)
        if (plan->arms[i].aa && plan->arms[i].base == base_arm)
            return i;
    return -1;
}

int opb_plan_pair(const opb_plan *plan, int var, int base, int again, int *aa_arm)
{
    if (base < 0 || base >= plan->n_arms || var >= plan->n_arms || again >= plan->n_arms)
        return TB_FAIL(TB_ERR_INVALID, "arms %d vs %d (again %d): out of range (%d arms)", var,
                       base, again, plan->n_arms);
    if (var >= 0 && (var == base || plan->arms[var].base != base || plan->arms[var].aa))
        return TB_FAIL(TB_ERR_INVALID, "%s was not declared a variant of %s (opb_compare)",
                       plan->names[var], plan->names[base]);
    int a = again >= 0 ? again : opb_plan_aa_arm(plan, base);
    if (a >= 0 && (!plan->arms[a].aa || plan->arms[a].base != base))
        return TB_FAIL(TB_ERR_INVALID, "%s was not declared the A/A copy of %s (opb_compare)",
                       plan->names[a], plan->names[base]);
    *aa_arm = a;
    return TB_OK;
}

int opb_plan_find(const opb_plan *plan, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < plan->n_arms; i++)
        if (!strncmp(plan->names[i], name, n) &&
            (plan->names[i][n] == 0 || plan->names[i][n] == '/'))
            return i;
    return -1;
}
