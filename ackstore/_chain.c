/* A cursor's newest marker and its delta chain, read and resolved for an open: the compiled
 * twin of storage/log.py's newest_marker and resolve_marker, for the chains the small form
 * reopens (cursor/small.py's chain_opened): markers in the fixed layout (format 9 on), under
 * the cursor's log keys, naming at most LINE_MOST ledgers none before the mark-delete
 * position's.
 *
 * read_chain reads through `probe`, a py-lmdb Cursor of the log database (its set_range, prev,
 * last, key, value and get), and gives what resolve_marker's ResolvedMarker holds of such a
 * chain, each ledger's acks and delivery counts since its record flat. It answers 1 (read),
 * 0 (not such a chain, or damaged: the Python functions read it, and say what they skipped)
 * or -1 (an exception other than damage). It never decides for damage: whatever it does not
 * read, newest_marker and recovery do, as before.
 *
 * It also holds the bounds of a chain's rules (cursor/chain.py's SMALL_CHAIN and
 * GARBAGE_FACTOR, given by chain_setup when that module is imported) that _native.h's
 * compiled rules apply.
 */
#include "_native.h"
#include "_chain.h"

#include <stddef.h>
#include <string.h>

static PyObject *str_set_range, *str_prev, *str_last, *str_key, *str_value, *str_get;

long long chain_small, chain_garbage; /* (_native.h's chain rules read them) */

/* chain_setup(SMALL_CHAIN, GARBAGE_FACTOR) -> None: the bounds of cursor/chain.py's rules,
 * which the compiled ones (_native.h's) apply from now on; ValueError below 1 */
PyObject *chain_setup(PyObject *self, PyObject *args) {
    long long small, garbage;
    if (!PyArg_ParseTuple(args, "LL", &small, &garbage)) return NULL;
    if (small < 1 || garbage < 1) {
        PyErr_Format(PyExc_ValueError, "chain_setup: SMALL_CHAIN %lld and GARBAGE_FACTOR %lld are at least 1", small,
                     garbage);
        return NULL;
    }
    chain_small = small, chain_garbage = garbage;
    Py_RETURN_NONE;
}

int chain_init(void) {
    return (str_set_range = PyUnicode_InternFromString("set_range")) && (str_prev = PyUnicode_InternFromString("prev")) &&
                   (str_last = PyUnicode_InternFromString("last")) && (str_key = PyUnicode_InternFromString("key")) &&
                   (str_value = PyUnicode_InternFromString("value")) && (str_get = PyUnicode_InternFromString("get"))
               ? 0
               : -1;
}

/* probe.<name>(arg) (arg NULL: none) as bytes (a new reference), Py_None for None; NULL with an exception */
static PyObject *call(PyObject *probe, PyObject *name, PyObject *arg) {
    PyObject *v = arg ? PyObject_CallMethodOneArg(probe, name, arg) : PyObject_CallMethodNoArgs(probe, name);
    if (v == NULL || v == Py_None || PyBytes_Check(v)) return v;
    PyObject *b = PyBytes_FromObject(v); /* (a buffer, when the environment gives them) */
    Py_DECREF(v);
    return b;
}

/* probe.get(key) for the 16 or 10 bytes at k */
static PyObject *get_key(PyObject *probe, const unsigned char *k, Py_ssize_t n) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)k, n);
    if (key == NULL) return NULL;
    PyObject *v = call(probe, str_get, key);
    Py_DECREF(key);
    return v;
}

PyObject *chain_record(PyObject *probe, unsigned long long cid, long long seq) {
    unsigned char key[16];
    put_log_key(key, cid, (uint64_t)seq);
    return get_key(probe, key, 16);
}

PyObject *slot_of_log(PyObject *probe, unsigned long long cid, int k) {
    unsigned char key[10];
    put_slot_key(key, cid, k);
    return get_key(probe, key, 10);
}

void chain_clear(LineChain *c) {
    for (int i = 0; i < c->n; i++) {
        PyMem_Free(c->e[i].adds);
        PyMem_Free(c->e[i].counts);
    }
    c->n = 0;
    Py_CLEAR(c->newest);
    Py_CLEAR(c->older_props);
}

/* A marker of the chain as read_chain reads it: its head, and its items from `items` (the
 * fixed layout's, or a msgpack marker's [ledger, seq, runs] arrays: `packed`) */
typedef struct {
    int full, packed;
    long long prev, md_l, md_e;
    uint16_t n;
    const unsigned char *items, *end; /* (end: the body's, for a msgpack item) */
    FixedMarker fm;
    Py_ssize_t props_at, props_end; /* where its properties are in the record (none: equal) */
} Head;

/* the item at `at` (h->items, then what the last call returned) into *it; where the next is */
static const unsigned char *next_item(const Head *h, const unsigned char *at, FixedItem *it) {
    if (!h->packed) return next_fixed_item(&h->fm, at, it);
    mp_reader r = {at + 1, h->end}; /* (a fixarray of 3 ints: marker_of checked) */
    int64_t v[3];
    for (int i = 0; i < 3; i++) mp_int(&r, &v[i]);
    it->ledger = (uint32_t)v[0], it->seq = v[1], it->runs = (uint32_t)v[2];
    it->nadds = it->ncounts = 0, it->adds = it->counts = NULL;
    return r.p;
}

/* a msgpack str at r skipped; -1 for another type or too short */
static int skip_str(mp_reader *r) {
    if (r->p >= r->end) return -1;
    unsigned c = *r->p++;
    uint32_t n = c & 0x1f;
    if ((c < 0xa0 || c > 0xbf) && (c < 0xd9 || c > 0xdb || mp_length(r, 1 << (c - 0xd9), &n) < 0)) return -1;
    if ((uint64_t)(r->end - r->p) < n) return -1;
    r->p += n;
    return 0;
}

/* a marker's properties at r skipped: a msgpack map of str keys to int or str values (what
 * records.pack_properties writes); -1 for anything else (records._properties' to judge) */
static int skip_props(mp_reader *r) {
    if (r->p >= r->end) return -1;
    unsigned c = *r->p++;
    uint32_t n = c & 0x0f;
    if ((c < 0x80 || c > 0x8f) && (c < 0xde || c > 0xdf || mp_length(r, c == 0xde ? 2 : 4, &n) < 0)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t v;
        if (skip_str(r) < 0) return -1;
        const unsigned char *at = r->p;
        if (mp_int(r, &v) < 0 && (r->p = at, skip_str(r) < 0)) return -1;
    }
    return 0;
}

/* a format 5 marker body (records.encode_marker's msgpack array) read into *h: only one whose
 * properties are a map of str to int or str and whose items are [ledger, seq, runs] of ints
 * in range, ascending; 0 for any other */
static int packed_marker(const unsigned char *b, Py_ssize_t len, unsigned long long cid, Head *h) {
    mp_reader r = {b, b + len};
    int64_t v[5], owner;
    uint32_t n;
    if (len < 1 || b[0] != 0x9a || (b[1] != 0xc2 && b[1] != 0xc3)) return 0; /* [full, ...] */
    h->full = b[1] == 0xc3, r.p = b + 2;
    for (int i = 0; i < 5; i++)
        if (mp_int(&r, &v[i]) < 0) return 0;
    const unsigned char *props = r.p;
    if (skip_props(&r) < 0) return 0;
    if (r.p - props > 1) h->props_at = 7 + (props - b), h->props_end = 7 + (r.p - b); /* (an empty map: none) */
    if (mp_array(&r, &n) < 0 || n > 0xFFFF) return 0; /* [items] */
    h->prev = v[0], h->md_l = v[1], h->md_e = v[2], h->n = (uint16_t)n, h->items = r.p, h->packed = 1;
    long long before = -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t item[3];
        if (r.p >= r.end || *r.p++ != 0x93) return 0;
        for (int k = 0; k < 3; k++)
            if (mp_int(&r, &item[k]) < 0) return 0;
        if (item[0] <= before || item[0] > 0xFFFFFFFFLL || item[1] < 0 || item[2] < 0 || item[2] > 0xFFFFFFFFLL)
            return 0;
        before = item[0];
    }
    if (r.p + 1 > r.end || *r.p++ != 0xc2 || mp_int(&r, &owner) < 0 || r.p != r.end) return 0; /* not truncated */
    h->end = r.end;
    return (owner == -1 || (owner >= 0 && (unsigned long long)owner == cid)) && v[1] >= 0 && v[2] >= -1;
}

/* the marker record `value` read into *h, checked as decode_marker and resolve_marker check
 * it (the envelope, the owner, a full marker naming no ledger as vanished, counts from 1);
 * 0 when it is not one this reads, or damaged */
static int marker_of(PyObject *value, unsigned long long cid, long long max_version, Head *h) {
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(value);
    Py_ssize_t len = PyBytes_GET_SIZE(value);
    memset(h, 0, sizeof(*h));
    if (len < 8 || p[0] != 0xC1 || p[1] != RECORD_MARKER || envelope_ok(p, len, max_version) < 0) {
        PyErr_Clear(); /* (damage: ValueError) */
        return 0;
    }
    h->props_at = h->props_end = len;
    if (p[7] != 0xC1) return p[2] >= 6 && packed_marker(p + 7, len - 7, cid, h);
    if (p[2] < 9 || read_fixed_marker(p + 7, len - 7, p[2], &h->fm) < 0) {
        PyErr_Clear();
        return 0;
    }
    FixedMarker *m = &h->fm;
    if (m->cid != cid) return 0;
    h->full = m->flags & 1, h->prev = m->prev, h->md_l = m->md_l, h->md_e = m->md_e, h->n = m->n, h->items = m->items;
    h->props_at = 7 + m->end;
    const unsigned char *at = m->items;
    long long before = -1;
    for (uint16_t i = 0; i < m->n; i++) { /* (ascending, as its writer writes them: a dict of them, one a ledger) */
        FixedItem it;
        at = next_fixed_item(m, at, &it);
        if ((it.seq < 0 && h->full) || (long long)it.ledger <= before) return 0;
        before = it.ledger;
        for (uint16_t k = 0; k < it.ncounts; k++)
            if (get32(it.counts + 8 * k + 4) == 0) return 0;
    }
    return 1;
}

/* the ledger's entry in c, or -1 */
static int find(const LineChain *c, uint32_t ledger) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].ledger == ledger) return i;
    return -1;
}

/* counts[*n] = (entry, count), as a dict's item set: a key held keeps its place; -1 MemoryError */
static int put_count(uint32_t **counts, Py_ssize_t *n, Py_ssize_t *room, uint32_t entry, uint32_t count) {
    for (Py_ssize_t i = 0; i < *n; i++)
        if ((*counts)[2 * i] == entry) {
            (*counts)[2 * i + 1] = count;
            return 0;
        }
    if (*n == *room) {
        Py_ssize_t r = *room ? 2 * *room : 8;
        uint32_t *more = PyMem_Realloc(*counts, sizeof(uint32_t) * 2 * (size_t)r);
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *counts = more, *room = r;
    }
    (*counts)[2 * *n] = entry, (*counts)[2 * *n + 1] = count, ++*n;
    return 0;
}

static int has(const uint32_t *v, Py_ssize_t n, uint32_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == x;
}

/* counts whose entry is one of the `na` acks `adds` taken away */
static Py_ssize_t without(uint32_t *counts, Py_ssize_t nc, const uint32_t *adds, Py_ssize_t na) {
    Py_ssize_t w = 0;
    for (Py_ssize_t k = 0; k < nc; k++)
        if (!has(adds, na, counts[2 * k])) counts[2 * w] = counts[2 * k], counts[2 * w + 1] = counts[2 * k + 1], w++;
    return w;
}

/* item `it` of a marker applied to the index as resolve_marker applies a delta's (the full
 * marker's: onto an empty index): a vanished ledger dropped; the same record as before, with
 * acks or counts named since, merged (acks united, the newer count winning, the item's acks
 * taking their counts away); else the item's entry. 1 applied, 0 more ledgers than LINE_MOST,
 * -1 MemoryError. */
static int apply(LineChain *c, const FixedItem *it) {
    int i = find(c, it->ledger);
    if (it->seq < 0) {
        if (i >= 0) {
            PyMem_Free(c->e[i].adds);
            PyMem_Free(c->e[i].counts);
            c->e[i] = c->e[--c->n];
        }
        return 1;
    }
    if (i < 0 && c->n == LINE_MOST) return 0;
    uint32_t *adds = NULL, *counts = NULL;
    Py_ssize_t na = 0, nc = 0, croom = 0;
    Named *old = i >= 0 ? &c->e[i] : NULL;
    int merge = old != NULL && old->seq == it->seq && (old->na || old->nc);
    if (it->nadds) {
        if ((adds = PyMem_Malloc(sizeof(uint32_t) * it->nadds)) == NULL) goto nomem;
        na = sorted_adds(it, adds);
    }
    if (merge) { /* {**old.counts, **entry.counts}: the old ones in their places */
        counts = old->counts, nc = old->nc, croom = old->croom;
        old->counts = NULL, old->nc = old->croom = 0;
    }
    for (uint16_t k = 0; k < it->ncounts; k++)
        if (put_count(&counts, &nc, &croom, get32(it->counts + 8 * k), get32(it->counts + 8 * k + 4)) < 0) goto fail;
    if (merge && nc && na) nc = without(counts, nc, adds, na);
    if (merge && old->na && na) { /* old.adds | entry.adds */
        uint32_t *u = PyMem_Malloc(sizeof(uint32_t) * (size_t)(old->na + na));
        if (u == NULL) goto nomem;
        Py_ssize_t a = 0, b = 0, m = 0;
        while (a < old->na || b < na) {
            uint32_t x = b >= na || (a < old->na && old->adds[a] < adds[b]) ? old->adds[a++] : adds[b++];
            if (!m || u[m - 1] != x) u[m++] = x;
        }
        PyMem_Free(adds);
        adds = u, na = m;
    } else if (merge && old->na) { /* old.adds, the item naming none */
        adds = old->adds, na = old->na;
        old->adds = NULL, old->na = 0;
    }
    if (old == NULL) {
        old = &c->e[c->n++];
    } else {
        PyMem_Free(old->adds);
        PyMem_Free(old->counts);
    }
    old->ledger = it->ledger, old->seq = it->seq, old->runs = it->runs;
    old->adds = adds, old->na = na, old->counts = counts, old->nc = nc, old->croom = croom;
    return 1;
nomem:
    PyErr_NoMemory();
fail:
    PyMem_Free(adds);
    PyMem_Free(counts);
    return -1;
}

int read_chain(PyObject *probe, unsigned long long cid, long long max_version, LineChain *c) {
    unsigned char head[16], slot[10];
    memset(c, 0, offsetof(LineChain, e));
    /* the cursor's newest record under a log key (_at_newest) */
    put_log_key(head, cid + 1, 0);
    PyObject *end = PyBytes_FromStringAndSize((const char *)head, 16), *v = NULL, *key = NULL;
    if (end == NULL) return -1;
    v = PyObject_CallMethodOneArg(probe, str_set_range, end);
    Py_DECREF(end);
    if (v == NULL) return -1;
    int at = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (at < 0 || (v = PyObject_CallMethodNoArgs(probe, at ? str_prev : str_last)) == NULL) return -1;
    at = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (at <= 0) return at;
    if ((key = call(probe, str_key, NULL)) == NULL) return -1;
    c->logged = PyBytes_GET_SIZE(key) >= 8 && get_u64_be((const unsigned char *)PyBytes_AS_STRING(key)) == cid;
    int mine = c->logged && PyBytes_GET_SIZE(key) == 16;
    unsigned long long seq = mine ? get_u64_be((const unsigned char *)PyBytes_AS_STRING(key) + 8) : 0;
    Py_DECREF(key);
    if (!mine) return 0;
    if ((c->newest = call(probe, str_value, NULL)) == NULL) return -1;
    Py_ssize_t len = PyBytes_GET_SIZE(c->newest);
    /* names_line: the head of a marker naming at most LINE_MOST ledgers, none before M's (a
     * look at its head first: a larger marker is not checked whole) */
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(c->newest);
    if (len < 8 || p[0] != 0xC1 || p[1] != RECORD_MARKER) goto other;
    if (p[7] == 0xC1 ? len < 7 + 28 || get16(p + 7 + 26) > LINE_MOST : len > 1024) goto other; /* (_SMALL_MARKER) */
    Head h0;
    if (!marker_of(c->newest, cid, max_version, &h0) || h0.n > LINE_MOST) goto other;
    if (h0.n) {
        FixedItem first;
        next_item(&h0, h0.items, &first);
        if (first.ledger < h0.md_l) goto other;
    }
    /* the state slots: their heads intact, what they hold older than the marker (read_slots) */
    unsigned long long held_seq[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        put_slot_key(slot, cid, k);
        PyObject *sv = get_key(probe, slot, 10);
        if (sv == NULL) goto fail;
        if (sv != Py_None) {
            Py_ssize_t start;
            c->slots |= 1 << k;
            int bad = get_slot_head(slot, 10, (const unsigned char *)PyBytes_AS_STRING(sv), PyBytes_GET_SIZE(sv),
                                    &held_seq[k], &start) < 0;
            Py_DECREF(sv);
            if (bad) {
                PyErr_Clear(); /* (damage: ValueError) */
                goto other;
            }
        } else {
            Py_DECREF(sv);
        }
    }
    c->slot = 1;
    if (c->slots) {
        c->slot = c->slots == 3 ? held_seq[1] > held_seq[0] : c->slots == 2;
        if (held_seq[c->slot] >= seq) goto other;
    }
    /* the chain back to its full marker (resolve_marker), then its items oldest first */
    Head ms[CHAIN_MOST];
    PyObject *values[CHAIN_MOST];
    unsigned long long at_seq = seq;
    int n = 0, ok = 1;
    values[n++] = Py_NewRef(c->newest);
    ms[0] = h0;
    for (;;) {
        Head *mk = &ms[n - 1];
        if (n > 1 && !marker_of(values[n - 1], cid, max_version, mk)) {
            ok = 0;
            break;
        }
        if (mk->full) break;
        if (mk->prev < 0 || (unsigned long long)mk->prev >= at_seq || n == CHAIN_MOST) {
            ok = 0;
            break;
        }
        at_seq = (unsigned long long)mk->prev;
        put_log_key(head, cid, at_seq);
        PyObject *older = get_key(probe, head, 16);
        if (older == NULL) goto fail_values;
        if (older == Py_None) { /* (in a slot, or missing: fetch_record's and resolve_marker's to say) */
            Py_DECREF(older);
            ok = 0;
            break;
        }
        values[n++] = older;
    }
    if (ok) {
        c->md_l = ms[0].md_l, c->md_e = ms[0].md_e, c->seq = (long long)seq, c->full_seq = (long long)at_seq;
        c->deltas = n - 1;
        c->full_bytes = PyBytes_GET_SIZE(values[n - 1]);
        for (int i = 0; i < n - 1; i++) c->chain_bytes += PyBytes_GET_SIZE(values[i]);
        c->props = (const unsigned char *)PyBytes_AS_STRING(c->newest) + ms[0].props_at;
        c->props_len = ms[0].props_end - ms[0].props_at;
    }
    for (int i = 1; ok && i < n; i++) { /* the older markers' properties, for the caller to check they decode */
        Py_ssize_t tail = ms[i].props_end - ms[i].props_at;
        if (!tail) continue;
        PyObject *props = PyBytes_FromStringAndSize(PyBytes_AS_STRING(values[i]) + ms[i].props_at, tail);
        if (props == NULL || (c->older_props == NULL && (c->older_props = PyList_New(0)) == NULL) ||
            PyList_Append(c->older_props, props) < 0) {
            Py_XDECREF(props);
            goto fail_values;
        }
        Py_DECREF(props);
    }
    for (int i = n - 1; ok && i >= 0; i--) {
        const unsigned char *it_at = ms[i].items;
        for (uint16_t k = 0; ok && k < ms[i].n; k++) {
            FixedItem it;
            it_at = next_item(&ms[i], it_at, &it);
            int r = apply(c, &it);
            if (r < 0) goto fail_values;
            ok = r;
        }
    }
    for (int i = 0; i < n; i++) Py_DECREF(values[i]);
    if (ok) return 1;
other:
    chain_clear(c);
    return 0;
fail_values:
    for (int i = 0; i < n; i++) Py_DECREF(values[i]);
fail:
    chain_clear(c);
    return -1;
}
