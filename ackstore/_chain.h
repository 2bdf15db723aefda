/* A cursor's newest marker chain resolved for an open (_chain.c). */
#pragma once
#include "_native.h"

#define LINE_MOST 256  /* the most ledgers a chain the open reads names: a form's line's (records.py's _LINE_ITEMS) */
#define CHAIN_MOST 256 /* the most markers of a chain it reads (more: storage/log.py's to resolve) */

/* a ledger the chain names: its record's sequence and runs, and the acks (ascending, no
 * repeats) and delivery counts ((entry, count) pairs, in the order a dict of them holds them)
 * its markers named since that record, entries of the ledger (PyMem, NULL while none) */
typedef struct {
    uint32_t ledger, runs;
    long long seq;
    uint32_t *adds, *counts;
    Py_ssize_t na, nc, croom;
} Named;

/* what resolve_marker's ResolvedMarker and newest_marker's NewestMarker hold of such a chain */
typedef struct {
    int n;                          /* the ledgers it names (e[0..n-1]), in no order */
    long long md_l, md_e, seq, full_seq;
    int deltas;                     /* its delta markers after the full one */
    Py_ssize_t full_bytes, chain_bytes;
    int slot, slots;                /* the slot holding the newer state (1: none), which hold a value */
    int logged;                     /* whether the cursor has any record under a log key (read_chain
                                       sets it whatever it returns: 0 for none, its log is its slots) */
    PyObject *newest;               /* the newest marker's record (a reference) */
    const unsigned char *props;     /* its properties as it wrote them (in `newest`), props_len bytes */
    Py_ssize_t props_len;
    PyObject *older_props;          /* the older markers' properties that are not none, as they wrote them
                                       (a list of bytes; NULL: none): resolve_marker checks they decode */
    Named e[LINE_MOST];             /* (last: read_chain clears what lies before it; each is set as it is named) */
} LineChain;

/* Cursor `cid`'s newest marker chain read through `probe` (a py-lmdb Cursor of the log
 * database) into *c: 1; 0 when its newest record is not such a chain (newest_marker's and
 * resolve_marker's to read, or to say what is damaged); -1 with an exception. chain_clear
 * frees what a 1 holds. */
int read_chain(PyObject *probe, unsigned long long cid, long long max_version, LineChain *c);
void chain_clear(LineChain *c);
/* record `seq` under cursor `cid`'s log key, read through `probe`: bytes, Py_None, or NULL with an exception */
PyObject *chain_record(PyObject *probe, unsigned long long cid, long long seq);
/* state slot `k` of cursor `cid`, read through `probe`: bytes, Py_None, or NULL with an exception */
PyObject *slot_of_log(PyObject *probe, unsigned long long cid, int k);
int chain_init(void);
