/*
 * techniques.h - the list bench:all walks: one entry per technique target.
 * Adding a technique: its bench/<name>.c, its target in bench/BUILD (also in
 * the data of //bench:all), and a line in techniques.c.
 */
#ifndef TB_TECHNIQUES_H
#define TB_TECHNIQUES_H

typedef struct tb_technique_entry {
    const char *name;           /* the binary and target name */
    const char *what;           /* one line for --help and the report */
    double est_seconds[3];      /* expected run time: default, full, tiny profile */
} tb_technique_entry;

extern const tb_technique_entry tb_techniques[];
extern const int tb_technique_count;

#endif
