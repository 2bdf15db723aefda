/* ackstore._native.scan_page and walk_trees: an LMDB data file's B-tree pages read with
 * ackstore's own code, before the library is let near a file that may be damaged
 * (ackstore/storage/lmdb_file.py documents the layout and the rules).
 *
 * scan_nodes checks one page's nodes. scan_page hands what it found to Python, for the
 * walker of lmdb_file.py (salvage's survey, and the names of the damage an open found);
 * walk_trees walks every tree of a file from its meta's roots with the same rules as that
 * walker and says only whether it found any damage, which is what every open asks (the
 * walker then names it). Its pure-Python twin is lmdb_file._py_walk_trees: the same
 * answer for the same bytes (tests/test_walk.py runs both on intact and damaged files).
 *
 * Only bytes inside the buffer are read: a page is read only when its number lies inside
 * it, and a node's key, data or overflow page number only once the page holds it.
 */
#include "_native.h"
#include <stdlib.h>
#include <string.h>

#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_META 0x08
#define P_LEAF2 0x20
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define F_DUPDATA 0x04
#define DB_RECORD 48 /* a named database's record: pad u32, flags u16, depth u16, five u64 */
#define MOST_DEPTH 32 /* LMDB's cursor stack: no tree it writes is deeper */

/* Python's bytes order of two keys: the common prefix, then the shorter first. */
static int key_less(const unsigned char *a, Py_ssize_t na, const unsigned char *b, Py_ssize_t nb) {
    Py_ssize_t m = na < nb ? na : nb;
    int c = memcmp(a, b, (size_t)m);
    return c < 0 || (c == 0 && na < nb);
}

/* Python's bytes order of two little-endian integer keys as pure_codecs.int_key_order
 * makes them: reversed, then padded with zero bytes in front to 8 bytes. */
static unsigned char int_byte(const unsigned char *k, Py_ssize_t n, Py_ssize_t len, Py_ssize_t j) {
    Py_ssize_t pad = len - n;
    return j < pad ? 0 : k[n - 1 - (j - pad)];
}

static int int_key_less(const unsigned char *a, Py_ssize_t na, const unsigned char *b, Py_ssize_t nb) {
    Py_ssize_t la = na < 8 ? 8 : na, lb = nb < 8 ? 8 : nb, m = la < lb ? la : lb;
    for (Py_ssize_t j = 0; j < m; j++) {
        unsigned char x = int_byte(a, na, la, j), y = int_byte(b, nb, lb, j);
        if (x != y) return x < y;
    }
    return la < lb;
}

/* one node's extent in its page, for the tiling check (sorted by ptr, then size, then index) */
typedef struct {
    Py_ssize_t ptr, size, i;
} extent;

static int extent_cmp(const void *a, const void *b) {
    const extent *x = a, *y = b;
    if (x->ptr != y->ptr) return x->ptr < y->ptr ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* what a tree's nodes may hold (lmdb_file._TREE_RULES): key sizes, leaf flags allowed and required */
typedef struct {
    Py_ssize_t kmin, kmax;
    unsigned allowed, required;
} Rules;

/* what scan_nodes finds wrong first (lmdb_file._PROBLEMS names them) */
enum { BAD_NONE, BAD_OFFSET, BAD_KEY, BAD_KSIZE, BAD_FLAGS, BAD_DATA, BAD_EXTENT, BAD_ORDER };
static const char *const BAD_NAMES[] = {NULL, "offset", "key", "ksize", "flags", "data", "extent", "order"};

/* one page's nodes as scan_nodes read them (arrays of `room`), and what it found */
typedef struct {
    Py_ssize_t room;
    Py_ssize_t *kpos, *klen, *kend, *dsize;
    unsigned *nflags;
    unsigned char *special;
    uint64_t *child;
    extent *ext;
    int bad;              /* BAD_NONE, or the first problem */
    Py_ssize_t bad_i;     /* its node */
    long long bad_value;  /* its offset or size or flags (the key, for BAD_ORDER: node bad_i's) */
    Py_ssize_t stop;      /* the nodes read before a node's own problem (n when none) */
} Scan;

static void scan_free(Scan *s) {
    PyMem_Free(s->kpos);
    PyMem_Free(s->klen);
    PyMem_Free(s->kend);
    PyMem_Free(s->dsize);
    PyMem_Free(s->nflags);
    PyMem_Free(s->special);
    PyMem_Free(s->child);
    PyMem_Free(s->ext);
    memset(s, 0, sizeof(*s));
}

/* room for `n` nodes; -1 with MemoryError */
static int scan_room(Scan *s, Py_ssize_t n) {
    if (n <= s->room) return 0;
    scan_free(s);
    size_t m = (size_t)n;
    s->kpos = PyMem_Malloc(m * sizeof(Py_ssize_t));
    s->klen = PyMem_Malloc(m * sizeof(Py_ssize_t));
    s->kend = PyMem_Malloc(m * sizeof(Py_ssize_t));
    s->dsize = PyMem_Malloc(m * sizeof(Py_ssize_t));
    s->nflags = PyMem_Malloc(m * sizeof(unsigned));
    s->special = PyMem_Malloc(m);
    s->child = PyMem_Malloc(m * sizeof(uint64_t));
    s->ext = PyMem_Malloc(m * sizeof(extent));
    if (!s->kpos || !s->klen || !s->kend || !s->dsize || !s->nflags || !s->special || !s->child || !s->ext) {
        scan_free(s);
        PyErr_NoMemory();
        return -1;
    }
    s->room = n;
    return 0;
}

static inline void found(Scan *s, int bad, Py_ssize_t i, long long value, Py_ssize_t stop) {
    s->bad = bad;
    s->bad_i = i;
    s->bad_value = value;
    s->stop = stop;
}

/* The `n` nodes of the page `pg` (psize bytes, its node area from `upper`), checked in
 * order as pure_codecs.scan_page documents: each node's offset, key and (a plain leaf
 * node's) data inside the page, its key size and leaf flags as the tree's rules allow,
 * the nodes tiling the node area, the keys in order. Fills `s` (room for n nodes): each
 * node's key, a branch node's child, a leaf node's flags, key end and data size and
 * whether it is special (not plain in-page data, or every leaf node with `all_special`);
 * s->bad the first problem. O(n), O(n log n) for nodes out of their usual order. */
static void scan_nodes(const unsigned char *pg, Py_ssize_t n, Py_ssize_t upper, Py_ssize_t psize, int leaf,
                       int integer_keys, int all_special, const Rules *r, Scan *s) {
    Py_ssize_t next = 0;
    found(s, BAD_NONE, 0, 0, n);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t ptr = get16(pg + 16 + 2 * i);
        if (ptr < upper || ptr > psize - 8) return found(s, BAD_OFFSET, i, ptr, i);
        const unsigned char *node = pg + ptr;
        uint32_t lo = get16(node), hi = get16(node + 2), nflags = get16(node + 4);
        Py_ssize_t ksize = get16(node + 6), kend = ptr + 8 + ksize;
        if (kend > psize) return found(s, BAD_KEY, i, ksize, i);
        if ((ksize < r->kmin || ksize > r->kmax) && (leaf || i > 0)) return found(s, BAD_KSIZE, i, ksize, i);
        s->kpos[i] = ptr + 8;
        s->klen[i] = ksize;
        s->special[i] = 0;
        if (!leaf) {
            s->ext[next++] = (extent){ptr, 8 + ksize, i};
            s->child[i] = (uint64_t)lo | (uint64_t)hi << 16 | (uint64_t)nflags << 32;
            continue;
        }
        if ((nflags & ~r->allowed) || (nflags & r->required) != r->required) return found(s, BAD_FLAGS, i, nflags, i);
        Py_ssize_t dsize = (Py_ssize_t)(lo | hi << 16);
        s->nflags[i] = nflags;
        s->kend[i] = kend;
        s->dsize[i] = dsize;
        if ((nflags & (F_BIGDATA | F_SUBDATA | F_DUPDATA)) || all_special)
            s->special[i] = 1;
        else if (kend + dsize > psize)
            return found(s, BAD_DATA, i, dsize, i);
        s->ext[next++] = (extent){ptr, 8 + ksize + ((nflags & F_BIGDATA) ? 8 : dsize), i};
    }
    /* the nodes tile the node area: LMDB packs them, each rounded up to an even size. Sorted
     * by offset: nodes appended in key order sit at falling offsets, so the index order
     * reversed is nearly sorted and an insertion sort is about linear (qsort past a bound) */
    extent *ext = s->ext;
    for (Py_ssize_t a = 0, b = next - 1; a < b; a++, b--) {
        extent t = ext[a];
        ext[a] = ext[b];
        ext[b] = t;
    }
    Py_ssize_t moves = 0;
    for (Py_ssize_t k = 1; k < next && moves <= 4 * next; k++) {
        extent t = ext[k];
        Py_ssize_t j = k;
        while (j > 0 && extent_cmp(&ext[j - 1], &t) > 0) {
            ext[j] = ext[j - 1];
            j--;
            moves++;
        }
        ext[j] = t;
    }
    if (moves > 4 * next) qsort(ext, (size_t)next, sizeof(extent), extent_cmp);
    Py_ssize_t at = upper;
    for (Py_ssize_t k = 0; k < next; k++) {
        if (ext[k].ptr != at) return found(s, BAD_EXTENT, ext[k].i, ext[k].ptr, n);
        at = ext[k].ptr + ext[k].size + (ext[k].size & 1);
    }
    if (next && at != psize) return found(s, BAD_EXTENT, ext[next - 1].i, ext[next - 1].ptr, n);
    for (Py_ssize_t i = leaf ? 1 : 2; i < n; i++) {
        const unsigned char *x = pg + s->kpos[i - 1], *y = pg + s->kpos[i];
        Py_ssize_t nx = s->klen[i - 1], ny = s->klen[i];
        if (!(integer_keys ? int_key_less(x, nx, y, ny) : key_less(x, nx, y, ny)))
            return found(s, BAD_ORDER, i, 0, n);
    }
}

/* append bytes `p[:n]` to `list`: -1 with an exception */
static int append_bytes(PyObject *list, const unsigned char *p, Py_ssize_t n) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)p, n);
    int r = b == NULL ? -1 : PyList_Append(list, b);
    Py_XDECREF(b);
    return r;
}

/* scan_page(buf, off, n, upper, psize, leaf, integer_keys, all_special[, kmin, kmax, allowed, required]):
 * pure_codecs.scan_page. */
static PyObject *scan_page(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    Py_ssize_t off, n, upper, psize;
    int leaf, integer_keys, all_special;
    Rules rules;
    PyObject *o[8] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (!PyArg_ParseTuple(args, "y*OOOOppp|OOOO", &raw, &o[0], &o[1], &o[2], &o[3], &leaf, &integer_keys, &all_special,
                          &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    {
        static const char *names[8] = {"off", "n", "upper", "psize", "kmin", "kmax", "allowed", "required"};
        long long v[8] = {0, 0, 0, 0, 0, 0xFFFF, 0xFFFF, 0};
        for (int a = 0; a < 8; a++) {
            if (o[a] != NULL && ranged_arg(o[a], names[a], 0, a < 4 ? PY_SSIZE_T_MAX : 0xFFFF, &v[a]) < 0) {
                PyBuffer_Release(&raw);
                return NULL;
            }
        }
        off = (Py_ssize_t)v[0], n = (Py_ssize_t)v[1], upper = (Py_ssize_t)v[2], psize = (Py_ssize_t)v[3];
        rules = (Rules){(Py_ssize_t)v[4], (Py_ssize_t)v[5], (unsigned)v[6], (unsigned)v[7]};
    }
    PyObject *result = NULL, *specials = PyList_New(0), *keys = PyList_New(0), *children = PyList_New(0);
    Scan s;
    memset(&s, 0, sizeof(s));
    if (specials == NULL || keys == NULL || children == NULL) goto done;
    if (off < 0 || n < 0 || psize < 24 || off > raw.len - psize || n > psize / 2 || 16 + 2 * n > psize) {
        PyErr_SetString(PyExc_ValueError, "a page outside the buffer");
        goto done;
    }
    if (scan_room(&s, n ? n : 1) < 0) goto done;
    const unsigned char *pg = (const unsigned char *)raw.buf + off;
    scan_nodes(pg, n, upper, psize, leaf, integer_keys, all_special, &rules, &s);
    for (Py_ssize_t i = 0; i < s.stop; i++) { /* the special nodes before any problem, in order */
        if (!s.special[i]) continue;
        PyObject *item = Py_BuildValue("(nIy#nn)", i, s.nflags[i], (const char *)pg + s.kpos[i], s.klen[i], s.kend[i],
                                       s.dsize[i]);
        if (item == NULL || PyList_Append(specials, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    if (s.bad != BAD_NONE) {
        PyObject *value = s.bad == BAD_ORDER
                              ? PyBytes_FromStringAndSize((const char *)pg + s.kpos[s.bad_i], s.klen[s.bad_i])
                          : s.bad == BAD_FLAGS ? PyLong_FromUnsignedLong((unsigned long)s.bad_value)
                                               : PyLong_FromLongLong(s.bad_value);
        if (value != NULL) result = Py_BuildValue("((nsN)O[][])", s.bad_i, BAD_NAMES[s.bad], value, specials);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (leaf && i != 0 && i != n - 1) continue; /* a leaf page's first and last keys */
        if (append_bytes(keys, pg + s.kpos[i], s.klen[i]) < 0) goto done;
        if (leaf && n == 1) { /* the first is the last */
            if (append_bytes(keys, pg + s.kpos[i], s.klen[i]) < 0) goto done;
        }
        if (!leaf) {
            PyObject *child = PyLong_FromUnsignedLongLong((unsigned long long)s.child[i]);
            if (child == NULL || PyList_Append(children, child) < 0) {
                Py_XDECREF(child);
                goto done;
            }
            Py_DECREF(child);
        }
    }
    result = Py_BuildValue("(OOOO)", Py_None, specials, keys, children);
done:
    scan_free(&s);
    Py_XDECREF(specials);
    Py_XDECREF(keys);
    Py_XDECREF(children);
    PyBuffer_Release(&raw);
    return result;
}

/* one B-tree's record (lmdb_file.DbRecord) */
typedef struct {
    uint64_t pad, flags, depth, branch, leaf, overflow, entries, root;
} DbRec;

/* a named database the main tree holds: its name (in the buffer) and record */
typedef struct {
    const unsigned char *name;
    Py_ssize_t len;
    DbRec db;
} Named;

typedef struct {
    const unsigned char *buf;
    Py_ssize_t psize;
    uint64_t pages;
    unsigned char *seen; /* a byte a page: reached */
    Scan scan;
    PyObject *own; /* the names of ackstore's own databases (lmdb_file.OWN_DATABASES) */
    Named *named;
    Py_ssize_t nnamed, named_room;
    uint64_t counts[4]; /* the tree being walked: branch, leaf, overflow pages, entries */
} Walker;

/* what a walk step says: go on, damage found, or an exception set */
enum { CLEAN = 0, DAMAGED = 1, FAILED = -1 };

/* Page `pgno` reached (lmdb_file._Walker.page): in the file, not reached before, saying it
 * is that page; its header into *flags, *lower, *upper and its bytes into *pg. */
static int reach(Walker *w, uint64_t pgno, unsigned *flags, Py_ssize_t *lower, Py_ssize_t *upper,
                 const unsigned char **pg) {
    if (pgno < 2 || pgno >= w->pages || w->seen[pgno]) return DAMAGED;
    w->seen[pgno] = 1;
    const unsigned char *p = w->buf + pgno * (uint64_t)w->psize;
    if (get64(p) != pgno) return DAMAGED;
    *flags = get16(p + 10);
    *lower = get16(p + 12);
    *upper = get16(p + 14);
    *pg = p;
    return CLEAN;
}

/* An overflow run of `dsize` bytes from page `pgno` (lmdb_file._Walker.overflow). */
static int overflow(Walker *w, uint64_t pgno, Py_ssize_t dsize) {
    unsigned flags;
    Py_ssize_t lower, upper;
    const unsigned char *pg;
    int r = reach(w, pgno, &flags, &lower, &upper, &pg);
    if (r != CLEAN) return r;
    uint64_t npages = get32(pg + 12);
    if (!(flags & P_OVERFLOW) || npages * (uint64_t)w->psize < (uint64_t)dsize + 16 || pgno + npages > w->pages)
        return DAMAGED;
    for (uint64_t extra = pgno + 1; extra < pgno + npages; extra++) w->seen[extra] = 1;
    w->counts[2] += npages;
    return CLEAN;
}

/* One free-list record at `p`, `size` bytes (lmdb_file._Walker.free_list): a count, then that many page numbers. */
static int free_list(const unsigned char *p, Py_ssize_t size) {
    if (size < 8 || size % 8) return DAMAGED;
    return get64(p) == (uint64_t)(size / 8 - 1) ? CLEAN : DAMAGED;
}

enum { TREE_FREE, TREE_MAIN, TREE_NAMED };

/* Leaf node `i` of page `pg` that is not plain in-page data (lmdb_file._Walker.special). */
static int special(Walker *w, const unsigned char *pg, Py_ssize_t i, int tree) {
    const Scan *s = &w->scan;
    unsigned nflags = s->nflags[i];
    Py_ssize_t kend = s->kend[i], dsize = s->dsize[i], psize = w->psize;
    if (nflags & F_DUPDATA) return DAMAGED;
    if (nflags & F_BIGDATA) {
        if (kend + 8 > psize) return DAMAGED;
        uint64_t opg = get64(pg + kend);
        int r = overflow(w, opg, dsize);
        if (r != CLEAN || tree != TREE_FREE) return r;
        return free_list(w->buf + opg * (uint64_t)psize + 16, dsize);
    }
    if (kend + dsize > psize) return DAMAGED;
    if (tree == TREE_FREE) return free_list(pg + kend, dsize);
    if (tree != TREE_MAIN) return CLEAN;
    const unsigned char *key = pg + s->kpos[i];
    Py_ssize_t klen = s->klen[i];
    if (!(nflags & F_SUBDATA)) {
        PyObject *name = PyBytes_FromStringAndSize((const char *)key, klen);
        if (name == NULL) return FAILED;
        int own = PySet_Contains(w->own, name);
        Py_DECREF(name);
        return own < 0 ? FAILED : own ? DAMAGED : CLEAN; /* it lost the flag that makes it a named database */
    }
    if (dsize != DB_RECORD) return DAMAGED;
    if (w->nnamed == w->named_room) {
        Py_ssize_t room = w->named_room ? 2 * w->named_room : 8;
        Named *grown = PyMem_Realloc(w->named, (size_t)room * sizeof(Named));
        if (grown == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        w->named = grown;
        w->named_room = room;
    }
    const unsigned char *d = pg + kend;
    w->named[w->nnamed++] = (Named){key, klen,
                                    {get32(d), get16(d + 4), get16(d + 6), get64(d + 8), get64(d + 16), get64(d + 24),
                                     get64(d + 32), get64(d + 40)}};
    return CLEAN;
}

/* Page `pgno` at `level` of a tree of `depth`, its keys within [low, high) (NULL:
 * unbounded), then its children (lmdb_file._Walker.node). */
static int node(Walker *w, uint64_t pgno, uint64_t level, uint64_t depth, const unsigned char *low, Py_ssize_t nlow,
                const unsigned char *high, Py_ssize_t nhigh, int tree, const Rules *rules) {
    unsigned flags;
    Py_ssize_t lower, upper, psize = w->psize;
    const unsigned char *pg;
    int r = reach(w, pgno, &flags, &lower, &upper, &pg);
    if (r != CLEAN) return r;
    unsigned kind = flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2);
    if (kind != (level == depth ? P_LEAF : P_BRANCH)) return DAMAGED;
    if (!(16 <= lower && lower <= upper && upper <= psize) || (lower - 16) % 2) return DAMAGED;
    Py_ssize_t n = (lower - 16) / 2;
    if (n == 0) return DAMAGED;
    int leaf = kind == P_LEAF, integer_keys = tree == TREE_FREE;
    w->counts[leaf ? 1 : 0]++;
    Scan *s = &w->scan;
    scan_nodes(pg, n, upper, psize, leaf, integer_keys, tree != TREE_NAMED, rules, s);
    for (Py_ssize_t i = 0; i < s->stop; i++) {
        if (s->special[i] && (r = special(w, pg, i, tree)) != CLEAN) return r;
    }
    if (s->bad != BAD_NONE) return DAMAGED;
    if (leaf) w->counts[3] += (uint64_t)n;
    Py_ssize_t first = leaf ? 0 : 1;
    if (n > first) { /* in order (checked): only the first and the last key can fall outside the bounds */
        int (*less)(const unsigned char *, Py_ssize_t, const unsigned char *, Py_ssize_t) =
            integer_keys ? int_key_less : key_less;
        if (low != NULL && less(pg + s->kpos[first], s->klen[first], low, nlow)) return DAMAGED;
        if (high != NULL && !less(pg + s->kpos[n - 1], s->klen[n - 1], high, nhigh)) return DAMAGED;
    }
    if (leaf) return CLEAN;
    /* the children, each within its keys: copied first, as each child's scan reuses the scan's arrays */
    Py_ssize_t *at = PyMem_Malloc((size_t)n * (2 * sizeof(Py_ssize_t) + sizeof(uint64_t)));
    if (at == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    Py_ssize_t *len = at + n;
    uint64_t *child = (uint64_t *)(len + n);
    memcpy(at, s->kpos, (size_t)n * sizeof(Py_ssize_t));
    memcpy(len, s->klen, (size_t)n * sizeof(Py_ssize_t));
    memcpy(child, s->child, (size_t)n * sizeof(uint64_t));
    for (Py_ssize_t i = 0; i < n && r == CLEAN; i++) {
        const unsigned char *c_low = i > 0 ? pg + at[i] : low, *c_high = i + 1 < n ? pg + at[i + 1] : high;
        Py_ssize_t n_low = i > 0 ? len[i] : nlow, n_high = i + 1 < n ? len[i + 1] : nhigh;
        r = node(w, child[i], level + 1, depth, c_low, n_low, c_high, n_high, tree, rules);
    }
    PyMem_Free(at);
    return r;
}

#define INVALID_PGNO UINT64_MAX

/* One tree from its record (lmdb_file._Walker.tree): its pages, then the counts its record states. */
static int walk_tree(Walker *w, const DbRec *db, int tree, const Rules *rules) {
    if (db->root == INVALID_PGNO) return db->entries || db->depth ? DAMAGED : CLEAN;
    if (db->depth < 1 || db->depth > MOST_DEPTH) return DAMAGED;
    memset(w->counts, 0, sizeof(w->counts));
    int r = node(w, db->root, 1, db->depth, NULL, 0, NULL, 0, tree, rules);
    if (r != CLEAN) return r;
    return w->counts[0] == db->branch && w->counts[1] == db->leaf && w->counts[2] == db->overflow &&
                   w->counts[3] == db->entries
               ? CLEAN
               : DAMAGED;
}

/* a DbRecord's 8 fields (u64: a root may be INVALID_PGNO) from a tuple of ints: -1 with an exception */
static int u64_tuple(PyObject *t, uint64_t *out, Py_ssize_t n, const char *what) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of %zd ints", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, i));
        if (out[i] == (uint64_t)-1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* a tree's rules from a tuple (kmin, kmax, allowed, required) of 16-bit ints: -1 with an exception */
static int rules_of(PyObject *t, Rules *r) {
    static const char *names[4] = {"kmin", "kmax", "allowed", "required"};
    long long v[4];
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
        PyErr_SetString(PyExc_TypeError, "rules must be a tuple of 4 ints");
        return -1;
    }
    for (int a = 0; a < 4; a++)
        if (ranged_arg(PyTuple_GET_ITEM(t, a), names[a], 0, 0xFFFF, &v[a]) < 0) return -1;
    *r = (Rules){(Py_ssize_t)v[0], (Py_ssize_t)v[1], (unsigned)v[2], (unsigned)v[3]};
    return 0;
}

/* walk_trees(buf, psize, pages, free, main, free_rules, main_rules, named_rules, any_rules, own) -> bool:
 * lmdb_file._py_walk_trees. */
static PyObject *walk_trees(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    Py_ssize_t psize, pages;
    PyObject *free_t, *main_t, *free_r, *main_r, *named_r, *any_r, *own;
    if (!PyArg_ParseTuple(args, "y*nnOOOOO!OO!", &raw, &psize, &pages, &free_t, &main_t, &free_r, &main_r,
                          &PyDict_Type, &named_r, &any_r, &PyFrozenSet_Type, &own))
        return NULL;
    PyObject *result = NULL;
    Walker w;
    memset(&w, 0, sizeof(w));
    DbRec free_db, main_db;
    Rules free_rules, main_rules, any_rules;
    if (u64_tuple(free_t, (uint64_t *)&free_db, 8, "free") < 0 || u64_tuple(main_t, (uint64_t *)&main_db, 8, "main") < 0 ||
        rules_of(free_r, &free_rules) < 0 || rules_of(main_r, &main_rules) < 0 || rules_of(any_r, &any_rules) < 0)
        goto done;
    if (psize < 24 || pages < 0 || psize > 65536) {
        PyErr_SetString(PyExc_ValueError, "walk_trees: a page size of 24..65536 bytes and a page count");
        goto done;
    }
    if ((uint64_t)pages > (uint64_t)(raw.len / psize)) pages = raw.len / psize; /* never past the buffer */
    w.buf = (const unsigned char *)raw.buf;
    w.psize = psize;
    w.pages = (uint64_t)pages;
    w.own = own;
    if ((w.seen = PyMem_Calloc((size_t)pages + 1, 1)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (scan_room(&w.scan, psize / 2) < 0) goto done;
    int r = walk_tree(&w, &free_db, TREE_FREE, &free_rules);
    if (r == CLEAN) r = walk_tree(&w, &main_db, TREE_MAIN, &main_rules);
    for (Py_ssize_t k = 0; k < w.nnamed && r == CLEAN; k++) {
        PyObject *name = PyBytes_FromStringAndSize((const char *)w.named[k].name, w.named[k].len), *got;
        if (name == NULL) goto done;
        got = PyDict_GetItemWithError(named_r, name);
        Py_DECREF(name);
        Rules rules = any_rules;
        if ((got == NULL && PyErr_Occurred()) || (got != NULL && rules_of(got, &rules) < 0)) goto done;
        r = walk_tree(&w, &w.named[k].db, TREE_NAMED, &rules);
    }
    if (r != FAILED) result = PyBool_FromLong(r == CLEAN);
done:
    scan_free(&w.scan);
    PyMem_Free(w.seen);
    PyMem_Free(w.named);
    PyBuffer_Release(&raw);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_page", scan_page, METH_VARARGS, "One B-tree page's nodes checked (pure_codecs.scan_page)."},
    {"walk_trees", walk_trees, METH_VARARGS, "Every B-tree of an LMDB file walked: True when no damage shows."},
    {NULL, NULL, 0, NULL},
};

int walk_init(PyObject *module) { return PyModule_AddFunctions(module, methods); }
