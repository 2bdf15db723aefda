/* ackstore._native.ack_position: the compiled twin of AckState.ack_one's common cases.
 *
 * Cursor.ack(Position) is a broker's most frequent call. Its rule is AckState.ack_one
 * (ackstore/cursor/state.py): check the position against the ledger's limit, ignore what
 * lies at or below the mark-delete position M, move M when the position is M + 1 and
 * nothing after it is acked (dropping the entry's delivery count and partial batch), else
 * add the entry to its ledger's acks with the exact change of the range count, charged to
 * the cache. This file does the same on the fields ackstore/fields.py declares (the ack
 * state's, its ledgers', their cache's and the store's pool's), each read at the index the
 * build wrote into _fields_layout.h, and on the BitMaps, dicts and sets they hold.
 *
 * It takes only the cases that need nothing else: the ledger's limit in the state's
 * one-entry cache, the ledger's acks loaded (or absent, for M + 1), no move of M past the
 * one position, no ledger left empty. Anything else it declines having changed nothing,
 * and AckState.ack_one decides it (it fills the limit's cache, swaps a ledger in, moves M
 * over a run, drops an emptied ledger). tests/test_ack_state.py runs both on the same
 * operations and compares every field.
 *
 * ack_position(state, position, version) -> 0: declined (nothing changed); 1: done;
 * 2: done, and the cache or the pool is over its budget (the caller evicts). Given a list
 * of positions, the same of each (ack_all: AckState.ack_items where every position is one
 * of the ledger whose limit the state caches).
 *
 * Around it, Cursor.ack itself (AckMethod, below): one Position, or a list of positions
 * (ack_all: each as one), acked from the caller's call with no Python frame, the
 * cursor's checks and the store's lock (a StoreLock, _lock.c) taken here (ack_cursor).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "_fields_layout.h"
#include "_native.h"

#define FIELD(o, i) (((PyObject **)((char *)(o) + sizeof(PyObject)))[i])

static PyTypeObject *position_type; /* ackstore.position.Position, given by ack_setup */
static long long ack_charge;        /* ledger_cache.ACK_CHARGE */
static long long ack_partial;       /* cursor/state.ACK_PARTIAL: + i, a list acked up to its i-th position */
static PyObject *str_move_to_end, *str_add;
/* the field types (ack_setup looks them up) and the class each one's last object was of */
static PyTypeObject *state_type, *ledger_type, *cache_type, *pool_type, *core_type, *host_type, *topic_type,
    *facade_type;
static PyTypeObject *state_seen, *ledger_seen, *cache_seen, *pool_seen, *core_seen, *host_seen, *topic_seen,
    *facade_seen;

/* *out = x when x is an int that fits; else 0 (no exception) */
static int small_int(PyObject *x, long long *out) {
    if (!PyLong_CheckExact(x)) return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(x, &overflow);
    return !overflow;
}

/* the field `i` of `o`, an int, into *out; 0 when it is not one that fits */
static int int_field(PyObject *o, int i, long long *out) {
    PyObject *v = FIELD(o, i);
    return v != NULL && small_int(v, out);
}

/* field `i` of `o` = n; -1 with an exception */
static int set_int(PyObject *o, int i, long long n) {
    PyObject *v = PyLong_FromLongLong(n);
    if (v == NULL) return -1;
    Py_XSETREF(FIELD(o, i), v);
    return 0;
}

/* Position(ledger, entry), a new reference (it takes references of its own to both) */
static PyObject *position(PyObject *ledger, PyObject *entry) {
    PyObject *p = position_type->tp_alloc(position_type, 2);
    if (p == NULL) return NULL;
    PyTuple_SET_ITEM(p, 0, Py_NewRef(ledger));
    PyTuple_SET_ITEM(p, 1, Py_NewRef(entry));
    return p;
}

/* 1 when `o` is of the field type `tp` or derives from it; `seen`: the class the last such
 * object was of (most are of the one class that derives from it: no walk of its bases) */
static int of(PyObject *o, PyTypeObject *tp, PyTypeObject **seen) {
    PyTypeObject *t = Py_TYPE(o);
    if (t == *seen) return 1;
    if (tp == NULL || !PyType_IsSubtype(t, tp)) return 0;
    Py_XSETREF(*seen, (PyTypeObject *)Py_NewRef(t));
    return 1;
}

/* 1/0 whether the BitMap or dict `c` holds `n`; -1 with an exception */
static int holds(PyObject *c, long long n) {
    PyObject *k = PyLong_FromLongLong(n);
    if (k == NULL) return -1;
    int r = PySequence_Contains(c, k);
    Py_DECREF(k);
    return r;
}

/* del d[key] when d (a dict) holds it: 1 when it did, 0 when not, -1 with an exception */
static int pop(PyObject *d, PyObject *key) {
    if (!PyDict_Check(d) || PyDict_GET_SIZE(d) == 0) return 0;
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) return PyErr_Occurred() ? -1 : 0;
    return PyDict_DelItem(d, key) < 0 ? -1 : 1;
}

/* M moves to (ledger, entry) (e: the entry as a C integer), the read position with it when
 * M passed it (AckState.set_md) */
static int set_md(PyObject *state, PyObject *ledger, PyObject *entry, long long l, long long e) {
    PyObject *md = position(ledger, entry);
    if (md == NULL) return -1;
    Py_XSETREF(FIELD(state, F_StateFields_md), md);
    Py_XSETREF(FIELD(state, F_StateFields_meta_dirty), Py_NewRef(Py_True));
    PyObject *rp = FIELD(state, F_StateFields_rp);
    long long rl, re;
    if (rp == NULL || !PyTuple_Check(rp) || PyTuple_GET_SIZE(rp) != 2 || !small_int(PyTuple_GET_ITEM(rp, 0), &rl) ||
        !small_int(PyTuple_GET_ITEM(rp, 1), &re)) {
        PyErr_SetString(PyExc_TypeError, "the read position is not a Position of ints");
        return -1;
    }
    if (rl < l || (rl == l && re < e + 1)) {
        PyObject *next = PyLong_FromLongLong(e + 1), *moved = next == NULL ? NULL : position(ledger, next);
        Py_XDECREF(next);
        if (moved == NULL) return -1;
        Py_XSETREF(FIELD(state, F_StateFields_rp), moved);
    }
    return 0;
}

/* An ack of one ledger's entries in progress (AckState.ack_one's rule, entry by entry):
 * what ack_begin read of the state once, the ledger's acks, and what the entries changed
 * so far that ack_end writes back once (M, the counters). Every PyObject is borrowed. */
typedef struct {
    PyObject *state, *cache, *loaded, *swapped, *dirty, *pool, *ledger;
    long long l, limit, md_l, md_e;
    PyObject *la, *bm, *counts, *batches; /* la: the ledger's acks, NULL when not loaded */
    PyObject *md_key;                     /* the entry M moved to (NULL: M did not move) */
    int counted;                          /* the counters below were read (the add path's) */
    long long runs, ranges, size, nbytes, budget, total, pool_budget, adds;
    int moved, dirtied;                   /* the ledger moved to the LRU's end, put in dirty */
} Acking;

/* Read what an ack of `ledger`'s entries needs of `state` at topic version `version`: 1
 * when the ledger's limit is cached for it (into a->limit), 0 declined (nothing read) */
static int ack_begin(Acking *a, PyObject *state, PyObject *ledger, long long version) {
    long long cached;
    a->state = state, a->ledger = ledger, a->md_key = NULL, a->counted = a->moved = a->dirtied = 0, a->adds = 0;
    if (!of(state, state_type, &state_seen) || !small_int(ledger, &a->l)) return 0;
    /* the ledger's limit, from the state's cache of it (ack_one fills it) */
    if (!int_field(state, F_StateFields_limit_ledger, &cached) || cached != a->l ||
        !int_field(state, F_StateFields_limit_version, &cached) || cached != version ||
        !int_field(state, F_StateFields_limit_value, &a->limit))
        return 0;
    PyObject *md = FIELD(state, F_StateFields_md), *cache = a->cache = FIELD(state, F_StateFields_cache);
    if (md == NULL || !PyTuple_Check(md) || PyTuple_GET_SIZE(md) != 2 ||
        !small_int(PyTuple_GET_ITEM(md, 0), &a->md_l) || !small_int(PyTuple_GET_ITEM(md, 1), &a->md_e) ||
        cache == NULL || !of(cache, cache_type, &cache_seen))
        return 0;
    a->loaded = FIELD(cache, F_CacheFields_loaded), a->swapped = FIELD(cache, F_CacheFields_swapped);
    a->dirty = FIELD(state, F_StateFields_dirty), a->pool = FIELD(cache, F_CacheFields_pool);
    if (a->loaded == NULL || !PyDict_Check(a->loaded) || a->swapped == NULL || !PyAnySet_Check(a->swapped) ||
        a->dirty == NULL || !PySet_Check(a->dirty) || a->pool == NULL || !of(a->pool, pool_type, &pool_seen))
        return 0;
    a->la = PyDict_GetItemWithError(a->loaded, ledger);
    if (a->la == NULL) return PyErr_Occurred() ? -1 : 1;
    if (!of(a->la, ledger_type, &ledger_seen)) return 0;
    a->bm = FIELD(a->la, F_LedgerFields_bitmap), a->counts = FIELD(a->la, F_LedgerFields_counts);
    a->batches = FIELD(a->la, F_LedgerFields_batches);
    if (a->bm == NULL || a->counts == NULL || a->batches == NULL || !PyDict_Check(a->counts) ||
        !PyDict_Check(a->batches))
        return 0;
    return 1;
}

/* the ledger to the LRU's end and into the dirty set, once an ack; -1 with an exception */
static int ack_touch(Acking *a, int dirty) {
    if (!a->moved) {
        PyObject *r = PyObject_CallMethodOneArg(a->loaded, str_move_to_end, a->ledger);
        if (r == NULL) return -1;
        Py_DECREF(r);
        a->moved = 1;
    }
    if (dirty && !a->dirtied) {
        if (PySet_Add(a->dirty, a->ledger) < 0) return -1;
        a->dirtied = 1;
    }
    return 0;
}

/* The ack of entry `key` (e: it as a C integer, 0 <= e <= a->limit) of the ledger begun:
 * 1 done, 0 declined (AckState.ack_one decides it; what the entries before it did stands),
 * -1 with an exception */
static int ack_entry(Acking *a, PyObject *key, long long e) {
    int t;
    if (a->l < a->md_l || (a->l == a->md_l && e <= a->md_e)) return 1; /* acked already */
    if (a->l == a->md_l && e == a->md_e + 1) {
        /* AckState._pass: M moves to this one position and no further */
        if (a->la == NULL) {
            if ((t = PySet_Contains(a->swapped, a->ledger)) != 0) return t < 0 ? -1 : 0; /* on disk: ack_one's */
        } else if ((t = holds(a->bm, e + 1)) != 0) {
            return t < 0 ? -1 : 0; /* M moves over a run: ack_one's */
        }
        if (e >= a->limit) return 0; /* a sealed ledger's last entry: M may go on to the next one */
        if (a->la != NULL) {
            int has_count = PyDict_GET_SIZE(a->counts) ? PyDict_Contains(a->counts, key) : 0;
            int has_batch = PyDict_GET_SIZE(a->batches) ? PyDict_Contains(a->batches, key) : 0;
            if (has_count < 0 || has_batch < 0) return -1;
            if (has_count || has_batch) {
                int acks = PyObject_IsTrue(a->bm);
                if (acks < 0) return -1;
                if (!acks && PyDict_GET_SIZE(a->counts) == has_count && PyDict_GET_SIZE(a->batches) == has_batch)
                    return 0; /* the ledger is left empty: ack_one drops it */
            }
            if (ack_touch(a, has_count || has_batch) < 0) return -1;
            if (has_count) {
                PyObject *since = FIELD(a->la, F_LedgerFields_counts_added);
                if (pop(a->counts, key) < 0 || (since != NULL && pop(since, key) < 0)) return -1;
            }
            if (has_batch) {
                if (pop(a->batches, key) < 0) return -1;
                Py_XSETREF(FIELD(a->la, F_LedgerFields_added), Py_NewRef(Py_None)); /* a new base */
            }
        }
        a->md_e = e, a->md_key = key; /* (ack_end writes M) */
        return 1;
    }
    /* AckState.ack_one's add: the entry joins its loaded ledger's acks */
    if (a->la == NULL) return 0; /* created or swapped in by ack_one */
    if (!a->counted) {
        PyObject *la = a->la, *cache = a->cache, *pool = a->pool;
        if (!int_field(la, F_LedgerFields_runs, &a->runs) || !int_field(a->state, F_StateFields_range_count, &a->ranges) ||
            !int_field(la, F_LedgerFields_size, &a->size) || !int_field(cache, F_CacheFields_nbytes, &a->nbytes) ||
            !int_field(cache, F_CacheFields_budget, &a->budget) || !int_field(pool, F_PoolFields_total, &a->total) ||
            !int_field(pool, F_PoolFields_budget, &a->pool_budget))
            return 0;
        a->counted = 1;
    }
    if (ack_touch(a, 0) < 0) return -1;
    if ((t = PySequence_Contains(a->bm, key)) != 0) return t < 0 ? -1 : 1;
    int before = e > 0 ? holds(a->bm, e - 1) : 0, after = before < 0 ? -1 : holds(a->bm, e + 1);
    if (after < 0) return -1;
    long long delta = 1 - before - after;
    PyObject *r = PyObject_CallMethodOneArg(a->bm, str_add, key), *added = FIELD(a->la, F_LedgerFields_added);
    if (r == NULL) return -1;
    Py_DECREF(r);
    if (added != NULL && added != Py_None) {
        if ((r = PyObject_CallMethodOneArg(added, str_add, key)) == NULL) return -1;
        Py_DECREF(r);
    }
    if ((t = pop(a->batches, key)) < 0) return -1;
    if (t) Py_XSETREF(FIELD(a->la, F_LedgerFields_added), Py_NewRef(Py_None)); /* a partial batch left the record */
    if (pop(a->counts, key) < 0) return -1; /* an acked entry has no delivery count */
    if (ack_touch(a, 1) < 0) return -1;
    a->runs += delta, a->ranges += delta, a->adds += 1;
    return 1;
}

/* What the entries changed, written back: M (and the read position with it), the run and
 * range counts, the bytes charged. 1, or 2 when the cache or the pool is now over its
 * budget (the caller evicts); -1 with an exception (still written back what could be) */
static int ack_end(Acking *a) {
    int failed = a->md_key != NULL && set_md(a->state, a->ledger, a->md_key, a->l, a->md_e) < 0;
    if (!a->counted) return failed ? -1 : 1;
    long long charge = a->adds * ack_charge;
    if (set_int(a->la, F_LedgerFields_runs, a->runs) < 0 || set_int(a->state, F_StateFields_range_count, a->ranges) < 0 ||
        set_int(a->la, F_LedgerFields_size, a->size + charge) < 0 ||
        set_int(a->cache, F_CacheFields_nbytes, a->nbytes + charge) < 0 ||
        set_int(a->pool, F_PoolFields_total, a->total + charge) < 0 || failed)
        return -1;
    return a->nbytes + charge > a->budget || a->total + charge > a->pool_budget ? 2 : 1;
}

/* The ack of `pos` (a 2-tuple) to `state` at topic version `version`: 0 declined (nothing
 * changed), 1 done, 2 done and over budget, -1 with an exception. */
static int ack_in(PyObject *state, PyObject *pos, long long version) {
    if (!PyTuple_Check(pos) || PyTuple_GET_SIZE(pos) != 2) return 0;
    PyObject *key = PyTuple_GET_ITEM(pos, 1); /* borrowed: the entry */
    long long e;
    Acking a;
    int r = ack_begin(&a, state, PyTuple_GET_ITEM(pos, 0), version);
    if (r <= 0) return r;
    if (!small_int(key, &e) || e < 0 || e > a.limit) return 0;
    r = ack_entry(&a, key, e);
    int end = ack_end(&a);
    return r < 0 || end < 0 ? -1 : r == 0 ? 0 : end;
}

/* ack_entry of every position of the list or tuple `seq` (AckState.ack_items on the
 * parts), where each is a Position of the ledger whose limit the state caches for
 * `version`, within that limit: 0 when one is not (nothing changed: the caller's ack checks
 * and takes the whole), or when ack_entry declines the first; ack_partial + i when it
 * declines the i-th, having acked those before it (the caller acks the rest: the rule
 * takes the i-th, as when M moves over a run or the ledger is left empty); else 1, or 2
 * when the cache or the pool went over its budget (the caller evicts, keeping the
 * positions' ledger) */
static int ack_all(PyObject *state, PyObject *seq, long long version) {
    Py_ssize_t n = PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
    PyObject **items = PyList_CheckExact(seq) ? ((PyListObject *)seq)->ob_item : ((PyTupleObject *)seq)->ob_item;
    long long l, e;
    Acking a;
    if (n == 0 || Py_TYPE(items[0]) != position_type) return 0;
    int r = ack_begin(&a, state, PyTuple_GET_ITEM(items[0], 0), version);
    if (r <= 0) return r;
    for (Py_ssize_t i = 0; i < n; i++) { /* every one checked before any is acked */
        PyObject *p = items[i];
        if (Py_TYPE(p) != position_type || !small_int(PyTuple_GET_ITEM(p, 0), &l) || l != a.l ||
            !small_int(PyTuple_GET_ITEM(p, 1), &e) || e < 0 || e > a.limit)
            return 0;
    }
    Py_ssize_t i = 0;
    for (; i < n && r > 0; i++) {
        if (PyList_CheckExact(seq) && PyList_GET_SIZE(seq) != n) { /* (changed under us: the caller's) */
            r = 0;
            break;
        }
        items = PyList_CheckExact(seq) ? ((PyListObject *)seq)->ob_item : items;
        PyObject *p = items[i], *key;
        if (Py_TYPE(p) != position_type || !small_int((key = PyTuple_GET_ITEM(p, 1)), &e) || e < 0 || e > a.limit) {
            r = 0; /* (changed under us, as above) */
            break;
        }
        r = ack_entry(&a, key, e);
    }
    int end = ack_end(&a);
    if (r < 0 || end < 0) return -1;
    if (r > 0) return end;
    return i > 1 && PyList_CheckExact(seq) && PyList_GET_SIZE(seq) == n ? (int)ack_partial + (int)(i - 1) : 0;
}

/* the field types, looked up once (ack_setup) */
static int typed(void) {
    if (state_type != NULL) return 0;
    state_type = fields_type_named("StateFields");
    ledger_type = fields_type_named("LedgerFields");
    cache_type = fields_type_named("CacheFields");
    pool_type = fields_type_named("PoolFields");
    core_type = fields_type_named("CoreFields");
    host_type = fields_type_named("HostFields");
    topic_type = fields_type_named("TopicFields");
    facade_type = fields_type_named("FacadeFields");
    if (state_type && ledger_type && cache_type && pool_type && core_type && host_type && topic_type && facade_type)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "ackstore.fields made no field types for the compiled ack");
    state_type = NULL;
    return -1;
}

/* call_ready for a function of this part: set up once ack_setup ran */
static int ready(const char *usage, Py_ssize_t nargs, Py_ssize_t want) {
    return call_ready(usage, usage, nargs, want, position_type != NULL, "ack_setup");
}

/* ack_position(state, position or list of positions, version): ack_in, or ack_all of a list */
static PyObject *ack_position(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long version;
    if (ready("ack_position(state, position, version)", nargs, 3) < 0) return NULL;
    int r = !small_int(args[2], &version)   ? 0
            : PyList_CheckExact(args[1]) ? ack_all(args[0], args[1], version)
                                         : ack_in(args[0], args[1], version);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

/* ack_cursor(core, positions) -> 0, 1, 2, 3, 4 or ack_partial + i: CursorCore.ack of one Position, or of a
 * list or tuple of positions, whole, where its checks pass without a word (the store open
 * and writable, the cursor not deleted; checked under the store's lock): in its small form,
 * that form's own ack (small_ack, which lists the form for the next flush when the ack
 * changed it first since the last), else, with its parts built, the ack (ack_in, ack_all)
 * and the cursor put on the flush list; the lock released. 0: declined before
 * anything changed (the core's own ack decides); 2: done, over budget (the caller evicts);
 * 3: done in the small form, over its cap (the parts take it); 4: done in the small form, M
 * moved on into the next ledger (the core bounds it again); ack_partial + i: on the parts,
 * a list's first i positions done, the rest the core's (ack_all). cursor_ack: the same, -1
 * with an exception. */
static int cursor_ack(PyObject *core, PyObject *pos) {
    int one = Py_TYPE(pos) == position_type, many = PyList_CheckExact(pos) || PyTuple_CheckExact(pos);
    if (!(one || many) || !of(core, core_type, &core_seen)) return 0;
    PyObject *lock = FIELD(core, F_CoreFields__lock), *host = FIELD(core, F_CoreFields__store);
    /* (the store's own lock, ackstore/lock.py: taken with no call through Python) */
    if (lock == NULL || !store_lock_check(lock) || host == NULL || !of(host, host_type, &host_seen)) return 0;
    if (store_lock_enter(lock) < 0) return -1;
    /* under the lock: a flush may have put the cursor in the small form, a close or a
     * delete may have come, since the caller looked */
    PyObject *topic = FIELD(core, F_CoreFields_topic), *state = FIELD(core, F_CoreFields__state),
             *listed = FIELD(core, F_CoreFields__flush_list), *planner = FIELD(core, F_CoreFields__planner);
    long long version;
    int r = 0;
    PyObject *small = FIELD(core, F_CoreFields_small);
    if (FIELD(host, F_HostFields_closed) == Py_False && FIELD(host, F_HostFields_readonly) == Py_False &&
        FIELD(core, F_CoreFields__deleted) == Py_False && small != NULL && topic != NULL &&
        of(topic, topic_type, &topic_seen) && int_field(topic, F_TopicFields_version, &version)) {
        if (small != Py_None) { /* the small form's own ack (_small.c); the form listed when it changed */
            PyObject *smalls = FIELD(host, F_HostFields_small_list);
            if (smalls != NULL) r = small_ack(small, pos, one, version, smalls, core);
        } else if (state != NULL && listed != NULL && PyDict_Check(listed) && planner != NULL) {
            r = one ? ack_in(state, pos, version) : ack_all(state, pos, version);
            if (r > 0 && PyDict_SetDefault(listed, core, planner) == NULL) r = -1; /* on the flush list */
        }
    }
    store_lock_exit(lock); /* (taken above: it gives back with no look at its owner, and never fails) */
    return r;
}

static PyObject *ack_cursor(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("ack_cursor(core, position)", nargs, 2) < 0) return NULL;
    int r = cursor_ack(args[0], args[1]);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

/* AckMethod: Cursor.ack itself, a method whose calls of one Position (or of a list of
 * positions, in the small form) the compiled ack takes with no Python frame between the
 * caller and it (a frame was about as much as the ack in the small form). It stands for
 * `spec`, the Python method (its name, doc and signature are spec's): the call hands
 * anything else to spec, and after an ack of cursor_ack's codes 2, 3 and 4 calls `follow`
 * (CursorCore.ack) with the code, as spec would. The cursor's core is the field its
 * FacadeFields declares. */
typedef struct {
    PyObject_HEAD
    PyObject *spec;   /* the Python method: its doc and signature, and every call not taken here */
    PyObject *follow; /* CursorCore.ack(core, position, code) */
    vectorcallfunc vectorcall;
} AckMethod;

static PyObject *am_call(AckMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL && facade_type != NULL &&
        of(args[0], facade_type, &facade_seen)) {
        PyObject *core = FIELD(args[0], F_FacadeFields__core);
        int r = core == NULL ? 0 : cursor_ack(core, args[1]);
        if (r < 0) return NULL;
        if (r == 1) Py_RETURN_NONE;
        if (r >= 2) {
            PyObject *code = PyLong_FromLong(r);
            if (code == NULL) return NULL;
            PyObject *call[3] = {core, args[1], code};
            PyObject *got = PyObject_Vectorcall(self->follow, call, 3, NULL);
            Py_DECREF(code);
            return got;
        }
    }
    return PyObject_Vectorcall(self->spec, args, nargsf, kwnames);
}

static PyObject *am_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int am_traverse(AckMethod *self, visitproc visit, void *arg) {
    Py_VISIT(self->spec);
    Py_VISIT(self->follow);
    return 0;
}

static int am_clear(AckMethod *self) {
    Py_CLEAR(self->spec);
    Py_CLEAR(self->follow);
    return 0;
}

static void am_dealloc(AckMethod *self) {
    PyObject_GC_UnTrack(self);
    am_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* spec's attribute `name` (its doc, name, module...) */
static PyObject *am_spec_attr(AckMethod *self, void *name) { return PyObject_GetAttrString(self->spec, name); }

static PyObject *am_wrapped(AckMethod *self, void *unused) { return Py_NewRef(self->spec); }

static PyGetSetDef am_getset[] = {
    {"__doc__", (getter)am_spec_attr, NULL, NULL, "__doc__"},
    {"__name__", (getter)am_spec_attr, NULL, NULL, "__name__"},
    {"__qualname__", (getter)am_spec_attr, NULL, NULL, "__qualname__"},
    {"__module__", (getter)am_spec_attr, NULL, NULL, "__module__"},
    {"__annotations__", (getter)am_spec_attr, NULL, NULL, "__annotations__"},
    {"__wrapped__", (getter)am_wrapped, NULL, NULL, NULL},
    {NULL},
};

static PyObject *am_repr(AckMethod *self) { return PyUnicode_FromFormat("<compiled %R>", self->spec); }

static PyTypeObject AckMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.AckMethod",
    .tp_basicsize = sizeof(AckMethod),
    .tp_dealloc = (destructor)am_dealloc,
    .tp_vectorcall_offset = offsetof(AckMethod, vectorcall),
    .tp_repr = (reprfunc)am_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_traverse = (traverseproc)am_traverse,
    .tp_clear = (inquiry)am_clear,
    .tp_getset = am_getset,
    .tp_descr_get = am_get,
};

/* ack_method(spec, follow) -> an AckMethod standing for spec (see above) */
static PyObject *ack_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "ack_method(spec, follow): two callables");
        return NULL;
    }
    if (typed() < 0) return NULL;
    AckMethod *m = PyObject_GC_New(AckMethod, &AckMethodType);
    if (m == NULL) return NULL;
    m->spec = Py_NewRef(args[0]);
    m->follow = Py_NewRef(args[1]);
    m->vectorcall = (vectorcallfunc)am_call;
    PyObject_GC_Track(m);
    return (PyObject *)m;
}

/* ack_setup(Position, ACK_CHARGE) */
static PyObject *ack_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "ack_setup(Position: a tuple type, ack_charge: int, ack_partial: int)");
        return NULL;
    }
    long long charge = PyLong_AsLongLong(args[1]), partial = PyLong_AsLongLong(args[2]);
    if ((charge == -1 || partial == -1) && PyErr_Occurred()) return NULL;
    if (partial < 5) {
        PyErr_SetString(PyExc_ValueError, "ack_partial must be above the other done codes (0-4)");
        return NULL;
    }
    if (typed() < 0) return NULL;
    Py_XSETREF(position_type, (PyTypeObject *)Py_NewRef(args[0]));
    ack_charge = charge;
    ack_partial = partial;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"ack_position", (PyCFunction)(void (*)(void))ack_position, METH_FASTCALL,
     "ack_position(state, position, version) -> 0 (declined: AckState.ack_one decides), 1 (done) or 2 "
     "(done; over budget); of a list of positions, each (0: AckState.ack_items decides)"},
    {"ack_cursor", (PyCFunction)(void (*)(void))ack_cursor, METH_FASTCALL,
     "ack_cursor(core, positions) -> 0 (declined: the core's ack decides), 1 (done), 2 (done; over budget), 3 "
     "(done in the small form; over its cap), 4 (done in the small form; M moved into another ledger) or "
     "ack_partial + i (a list's first i positions done on the parts; the rest the core's)"},
    {"ack_setup", (PyCFunction)(void (*)(void))ack_setup, METH_FASTCALL, "ack_setup(Position, ack_charge, ack_partial)"},
    {"ack_method", (PyCFunction)(void (*)(void))ack_method, METH_FASTCALL,
     "ack_method(spec, follow) -> Cursor.ack compiled: one Position or a list acked with no Python frame, "
     "any other call handed to spec (the Python method), a done code of 2 or more to follow (CursorCore.ack)"},
    {NULL, NULL, 0, NULL},
};

int ack_init(PyObject *m) {
    if (PyType_Ready(&AckMethodType) < 0) return -1;
    if ((str_move_to_end = PyUnicode_InternFromString("move_to_end")) == NULL ||
        (str_add = PyUnicode_InternFromString("add")) == NULL)
        return -1;
    return PyModule_AddFunctions(m, methods);
}
