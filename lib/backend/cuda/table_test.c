/*
 * table_test.c - every function-pointer slot of the CUDA backend's
 * table (lib/backend/backend.h) is filled, but the low-precision activations'
 * (optional: NULL keeps a model's activations fp32), and no two slots share
 * a function: no op falls back to a common "unimplemented" stub. Needs no GPU: the table
 * is filled by tb_backend_cuda_fill_table, which touches no device.
 *
 * The slots are walked from the table itself, not from a list written by
 * hand: everything in struct tb_backend after `ctx` is a function pointer
 * (a static assertion below keeps that true), so a new slot is checked the
 * day it is added. Each slot is printed with the name of the function in it,
 * read from the ELF symbol table of the object that holds it (dladdr finds
 * the object; static functions are in .symtab, not in what dladdr reads).
 *
 * Run: bazel test //lib/backend/cuda:cuda_table_test
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/backend/cuda/cuda.h"

typedef int (*slot_fn)(void);

#define FIRST_SLOT offsetof(tb_backend, dev_alloc)
#define NSLOTS ((sizeof(tb_backend) - FIRST_SLOT) / sizeof(slot_fn))

_Static_assert(offsetof(tb_backend, dev_alloc) == offsetof(tb_backend, ctx) + sizeof(void *),
               "dev_alloc must be the first slot after ctx");
_Static_assert((sizeof(tb_backend) - offsetof(tb_backend, dev_alloc)) % sizeof(slot_fn) == 0,
               "everything after ctx in tb_backend must be a function pointer");

/* Name of the function at addr from the .symtab of the object holding it;
 * "?" when there is none (stripped binary). */
static void symbol_name(const void *addr, char *out, size_t cap)
{
    Dl_info info;
    snprintf(out, cap, "?");
    if (!dladdr(addr, &info) || !info.dli_fname)
        return;
    const char *path = info.dli_fname[0] ? info.dli_fname : "/proc/self/exe";
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0)
        return;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    const unsigned char *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    uintptr_t rel = (uintptr_t)addr - (eh->e_type == ET_EXEC ? 0 : (uintptr_t)info.dli_fbase);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB)
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(m + sh[i].sh_offset);
        const char *str = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        size_t n = sh[i].sh_size / sizeof *sym;
        for (size_t j = 0; j < n; j++) {
            if (ELF64_ST_TYPE(sym[j].st_info) == STT_FUNC && sym[j].st_value == rel) {
                snprintf(out, cap, "%s", str + sym[j].st_name);
                munmap((void *)m, (size_t)sb.st_size);
                return;
            }
        }
    }
    munmap((void *)m, (size_t)sb.st_size);
}

int main(void)
{
    tb_backend be;
    slot_fn slots[NSLOTS];
    char name[128];
    int failures = 0;

    memset(&be, 0, sizeof be);
    tb_backend_cuda_fill_table(&be);
    memcpy(slots, (const char *)&be + FIRST_SLOT, sizeof slots);

    if (!be.name || strcmp(be.name, "cuda") != 0) {
        printf("FAIL: name is %s, not cuda\n", be.name ? be.name : "NULL");
        failures++;
    }
    if (!tb_cuda_owns(&be)) {
        printf("FAIL: tb_cuda_owns does not recognize the filled table\n");
        failures++;
    }
    /* slots lib/backend/backend.h lets a backend leave NULL, as CUDA does:
     * the low-precision activations (layers then keep fp32 ones) and
     * conv_bwd (layers then make the two calls) */
    static const size_t may_be_null[] = {
        offsetof(tb_backend, relu_fwd_lowp), offsetof(tb_backend, relu_bwd_lowp),
        offsetof(tb_backend, add_lowp), offsetof(tb_backend, conv_bwd)};
    for (size_t i = 0; i < NSLOTS; i++) {
        int optional = 0;
        for (size_t k = 0; k < sizeof may_be_null / sizeof may_be_null[0]; k++)
            optional |= FIRST_SLOT + i * sizeof(slot_fn) == may_be_null[k];
        if (!slots[i] && optional) {
            printf("slot %2zu  NULL (allowed: low-precision activations, conv_bwd)\n", i);
            continue;
        }
        if (!slots[i]) {
            printf("FAIL: slot %zu (byte offset %zu) is NULL\n", i,
                   FIRST_SLOT + i * sizeof(slot_fn));
            failures++;
            continue;
        }
        symbol_name((const void *)slots[i], name, sizeof name);
        printf("slot %2zu  %s\n", i, name);
        for (size_t j = 0; j < i; j++) {
            if (slots[j] == slots[i]) {
                printf("FAIL: slots %zu and %zu hold the same function (%s)\n", j, i, name);
                failures++;
            }
        }
    }
    printf("%zu slots, %d failure%s\n", (size_t)NSLOTS, failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
