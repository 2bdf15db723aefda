/* ackstore._native.take_marker, commit_marker, take_all and commit_all: the compiled twins
 * of the functions of the same names in ackstore/cursor/lane.py.
 *
 * A group flush asks every dirty cursor for its plan, and most of them have a few acks in
 * ledgers that have a record already: lane.take_marker takes such a change whole (one
 * marker, encoded under the store lock) and lane.commit_marker adopts it once written;
 * take_all and commit_all are the flush's loops around them.
 * The functions here do what the Python ones do, reading and changing the same attributes
 * of the same objects with the same effects (take_marker changes nothing before its plan
 * is made), so the two give equal plans and leave equal cursors; tests/test_lane.py and
 * the state machines run both on the same cursors. They are compiled because a flush runs
 * them for every dirty cursor, and in Python their cost was mostly operations on a few
 * dozen small objects.
 *
 * lane_setup (lane.py calls it at import, and again when the tests change the bounds)
 * gives the plan class, the bounds and the helpers. The fields the lane reads are those of
 * ackstore/fields.py's field types, which _fields.c made: each is read and written at the
 * place its field type put it (its index in _fields_layout.h, which the build writes from
 * ackstore/fields.py) when the object is of that type or derives from it (every planner,
 * part, ledger and plan a flush makes is); only another object (a test's stand-in) goes
 * through the attribute protocol, by the name the table below keeps for it. The lane calls
 * no method of ackstore's classes: the general path's plans are taken, encoded and adopted
 * by the group flush itself (flush.py); what it calls it is given (lane_setup).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_fields_layout.h"
#include "_native.h"

/* in _native.c and _fields.c */
PyObject *fixed_marker(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *state_marker_of(PyObject *version, PyObject *cid, PyObject *md_l, PyObject *md_e, Py_ssize_t n,
                          PyObject *const *ids, PyObject *const *bitmaps, PyObject *const *batches,
                          PyObject *const *counts, PyObject *props, int cut);
PyObject *sealed_slot(unsigned long long cid, int slot, unsigned long long seq, PyObject *record,
                      Py_ssize_t reserve, PyObject **key_out);

/* the field types of ackstore/fields.py the lane reads */
enum { C_PLANNER, C_PAGES, C_STATE, C_CHAIN, C_LEDGER, C_PLAN, C_COUNT };
static const char *owner_names[C_COUNT] = {"PlannerFields", "PagesFields", "StateFields", "ChainFields",
                                           "LedgerFields", "PlanFields"};

/* the attributes, each with the class that holds it */
enum {
    A_PAGES, A_STATE, A_CHAIN, A_CAP, A_FULL_EVERY, A_HISTORY, A_CURSOR_ID,
    A_DIRTY, A_UNMARKED, A_VANISHED, A_LOADED, A_SWAPPED, A_INDEX, A_PINNED,
    A_META_DIRTY, A_RANGE_COUNT, A_MD, A_PROPERTIES,
    A_OVER_CAP, A_FORCE_FULL, A_TRUNCATED, A_MARKER_SEQ, A_DELTAS, A_CHAIN_BYTES, A_FULL_BYTES,
    A_NEXT_SEQ, A_UNTRIMMED, A_FULL_SEQ, A_FULL_LIVE, A_PERSISTED, A_FLUSHES, A_LAST_BYTES, A_TOTAL_BYTES, A_FLOOR,
    A_KEPT, A_SLOT, A_SLOTS,
    A_ADDED, A_COUNTS_ADDED, A_COUNTS, A_RUNS, A_BITMAP, A_BATCHES,
    P_CURSOR_ID, P_CHANGES, P_FULL, P_MARKER_SEQ, P_PINNED, P_META_DIRTY, P_PERSISTED, P_PUTS, P_MARKER_BYTES,
    P_NBYTES, P_GC_BELOW, P_GC_LIVE, P_TRIM_KEYS, P_FULL_LIVE, P_DROPPED, P_TRUNCATED, P_KEEP_DIRTY,
    A_COUNT
};

typedef struct {
    int owner;
    const char *name;
    int index;           /* its place in its field type (_fields_layout.h), -1: the attribute protocol */
    PyObject *str;       /* interned */
    PyTypeObject *type;  /* the field type that holds it (NULL: the attribute protocol) */
    Py_ssize_t offset;   /* where in an instance of it */
    PyTypeObject *seen;  /* the class derived from it the last object was of (a strong reference) */
} Attr;

/* an attribute of field type T (owner O): its name and its index in _fields_layout.h */
#define FIELD_OF(O, T, name) {O, #name, F_##T##_##name}

static Attr attrs[A_COUNT] = {
    [A_PAGES] = FIELD_OF(C_PLANNER, PlannerFields, pages),
    [A_STATE] = FIELD_OF(C_PLANNER, PlannerFields, state),
    [A_CHAIN] = FIELD_OF(C_PLANNER, PlannerFields, chain),
    [A_CAP] = FIELD_OF(C_PLANNER, PlannerFields, cap),
    [A_FULL_EVERY] = FIELD_OF(C_PLANNER, PlannerFields, full_every),
    [A_HISTORY] = FIELD_OF(C_PLANNER, PlannerFields, history),
    [A_CURSOR_ID] = FIELD_OF(C_PLANNER, PlannerFields, cursor_id),
    [A_DIRTY] = FIELD_OF(C_PAGES, PagesFields, dirty),
    [A_UNMARKED] = FIELD_OF(C_PAGES, PagesFields, unmarked),
    [A_VANISHED] = FIELD_OF(C_PAGES, PagesFields, vanished),
    [A_LOADED] = FIELD_OF(C_PAGES, PagesFields, loaded),
    [A_SWAPPED] = FIELD_OF(C_PAGES, PagesFields, swapped),
    [A_INDEX] = FIELD_OF(C_PAGES, PagesFields, index),
    [A_PINNED] = FIELD_OF(C_PAGES, PagesFields, pinned),
    [A_META_DIRTY] = FIELD_OF(C_STATE, StateFields, meta_dirty),
    [A_RANGE_COUNT] = FIELD_OF(C_STATE, StateFields, range_count),
    [A_MD] = FIELD_OF(C_STATE, StateFields, md),
    [A_PROPERTIES] = FIELD_OF(C_STATE, StateFields, properties),
    [A_OVER_CAP] = FIELD_OF(C_CHAIN, ChainFields, over_cap),
    [A_FORCE_FULL] = FIELD_OF(C_CHAIN, ChainFields, force_full),
    [A_TRUNCATED] = FIELD_OF(C_CHAIN, ChainFields, truncated),
    [A_MARKER_SEQ] = FIELD_OF(C_CHAIN, ChainFields, marker_seq),
    [A_DELTAS] = FIELD_OF(C_CHAIN, ChainFields, deltas),
    [A_CHAIN_BYTES] = FIELD_OF(C_CHAIN, ChainFields, chain_bytes),
    [A_FULL_BYTES] = FIELD_OF(C_CHAIN, ChainFields, full_bytes),
    [A_NEXT_SEQ] = FIELD_OF(C_CHAIN, ChainFields, next_seq),
    [A_UNTRIMMED] = FIELD_OF(C_CHAIN, ChainFields, untrimmed),
    [A_FULL_SEQ] = FIELD_OF(C_CHAIN, ChainFields, full_seq),
    [A_FULL_LIVE] = FIELD_OF(C_CHAIN, ChainFields, full_live),
    [A_PERSISTED] = FIELD_OF(C_CHAIN, ChainFields, persisted_ranges),
    [A_FLUSHES] = FIELD_OF(C_CHAIN, ChainFields, flushes),
    [A_LAST_BYTES] = FIELD_OF(C_CHAIN, ChainFields, last_flush_bytes),
    [A_TOTAL_BYTES] = FIELD_OF(C_CHAIN, ChainFields, total_flush_bytes),
    [A_FLOOR] = FIELD_OF(C_CHAIN, ChainFields, floor),
    [A_KEPT] = FIELD_OF(C_CHAIN, ChainFields, kept),
    [A_SLOT] = FIELD_OF(C_CHAIN, ChainFields, slot),
    [A_SLOTS] = FIELD_OF(C_CHAIN, ChainFields, slots),
    [A_ADDED] = FIELD_OF(C_LEDGER, LedgerFields, added),
    [A_COUNTS_ADDED] = FIELD_OF(C_LEDGER, LedgerFields, counts_added),
    [A_RUNS] = FIELD_OF(C_LEDGER, LedgerFields, runs),
    [A_BITMAP] = FIELD_OF(C_LEDGER, LedgerFields, bitmap),
    [A_COUNTS] = FIELD_OF(C_LEDGER, LedgerFields, counts),
    [A_BATCHES] = FIELD_OF(C_LEDGER, LedgerFields, batches),
    [P_CURSOR_ID] = FIELD_OF(C_PLAN, PlanFields, cursor_id),
    [P_CHANGES] = FIELD_OF(C_PLAN, PlanFields, changes),
    [P_FULL] = FIELD_OF(C_PLAN, PlanFields, full),
    [P_MARKER_SEQ] = FIELD_OF(C_PLAN, PlanFields, marker_seq),
    [P_PINNED] = FIELD_OF(C_PLAN, PlanFields, pinned),
    [P_META_DIRTY] = FIELD_OF(C_PLAN, PlanFields, meta_dirty),
    [P_PERSISTED] = FIELD_OF(C_PLAN, PlanFields, persisted_ranges),
    [P_PUTS] = FIELD_OF(C_PLAN, PlanFields, puts),
    [P_MARKER_BYTES] = FIELD_OF(C_PLAN, PlanFields, marker_bytes),
    [P_NBYTES] = FIELD_OF(C_PLAN, PlanFields, nbytes),
    [P_GC_BELOW] = FIELD_OF(C_PLAN, PlanFields, gc_below),
    [P_GC_LIVE] = FIELD_OF(C_PLAN, PlanFields, gc_live),
    [P_TRIM_KEYS] = FIELD_OF(C_PLAN, PlanFields, trim_keys),
    [P_FULL_LIVE] = FIELD_OF(C_PLAN, PlanFields, full_live),
    [P_DROPPED] = FIELD_OF(C_PLAN, PlanFields, dropped),
    [P_TRUNCATED] = FIELD_OF(C_PLAN, PlanFields, truncated),
    [P_KEEP_DIRTY] = FIELD_OF(C_PLAN, PlanFields, keep_dirty),
};

/* the methods of an LMDB cursor the trim calls (interned by lane_setup) */
enum { M_SET_KEY, M_DELETE, N_COUNT };
static const char *names[N_COUNT] = {"set_key", "delete"};
static PyObject *name_str[N_COUNT];

/* what lane_setup gives */
static PyObject *plan_type, *entry_type, *frozen_type, *packb, *log_key_fn, *version, *empty_set, *empty_tuple,
    *fallback_commit, *trim_records_fn, *lmdb_error,
    *no_optimize, /* ("optimize",): FrozenBitMap(added, optimize=False) */
    *no_entries; /* ledger_acks.NO_ENTRIES: a ledger's batches, counts or counts added while empty */
/* the most sequences a chain keeps under its floor (lane_setup refuses an EXACT_TRIM past it) */
#define KEPT_ROOM 32
long long chain_small, chain_garbage; /* (_native.h's chain rules read them) */
static long long max_acks, state_max_runs, state_max_extras, state_max_bytes,
    exact_trim, slot_reserve;
static double max_share;

/* The field accessors below run a few dozen times for every cursor a flush plans and
 * adopts: inlined, each call site reads its attribute's place directly (callgrind, a
 * steady cursor's take and commit: 15.0k -> 12.5k instructions; a one-ack cursor of the
 * marker layout, take, encode and adopt: 17.9k -> 15.9k). */
#if defined(__GNUC__) || defined(__clang__)
#define ACCESSOR static inline __attribute__((always_inline))
#else
#define ACCESSOR static inline
#endif

/* obj.<a> (a new reference), or NULL with AttributeError */
/* whether obj is of the field type that holds attribute `at`: most often of the class
 * the last one was of */
static inline int holds(PyObject *obj, Attr *at) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp == at->seen) return 1;
    if (at->type == NULL || !PyType_IsSubtype(tp, at->type)) return 0;
    Py_XSETREF(at->seen, (PyTypeObject *)Py_NewRef(tp));
    return 1;
}

ACCESSOR PyObject *get(PyObject *obj, int a) {
    Attr *at = &attrs[a];
    if (holds(obj, at)) {
        PyObject *v = *(PyObject **)((char *)obj + at->offset);
        if (v != NULL) return Py_NewRef(v);
        PyErr_SetObject(PyExc_AttributeError, at->str);
        return NULL;
    }
    return PyObject_GetAttr(obj, at->str);
}

/* obj.<a> = v; -1 with an exception */
ACCESSOR int set(PyObject *obj, int a, PyObject *v) {
    Attr *at = &attrs[a];
    if (holds(obj, at)) {
        PyObject **slot = (PyObject **)((char *)obj + at->offset);
        Py_XSETREF(*slot, Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(obj, at->str, v);
}

/* obj.<a> = n (a C integer); -1 with an exception */
ACCESSOR int set_ll(PyObject *obj, int a, long long n) {
    PyObject *v = PyLong_FromLongLong(n);
    if (v == NULL) return -1;
    int r = set(obj, a, v);
    Py_DECREF(v);
    return r;
}

/* 1 or 0 for obj.<a>'s truth, -1 with an exception */
ACCESSOR int truth(PyObject *obj, int a) {
    PyObject *v = get(obj, a);
    if (v == NULL) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* obj.<a> as a C integer; -1 with an exception set (check PyErr_Occurred) */
ACCESSOR long long integer(PyObject *obj, int a) {
    PyObject *v = get(obj, a);
    if (v == NULL) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return x;
}
#define FAILED(x) ((x) == -1 && PyErr_Occurred())

/* call_ready for a function of this part: set up once lane_setup ran */
static int ready(const char *function, const char *usage, Py_ssize_t nargs, Py_ssize_t want) {
    return call_ready(function, usage, nargs, want, plan_type != NULL, "lane_setup");
}

/* lane_setup(MarkerPlan, IndexEntry, FrozenBitMap, packb, log_key, format_version, commit,
 *            trim_records, lmdb.Error, DELTA_MAX_ACKS, DELTA_MAX_SHARE, SMALL_CHAIN, GARBAGE_FACTOR,
 *            STATE_MAX_RUNS, STATE_MAX_EXTRAS, STATE_MAX_BYTES, EXACT_TRIM, SLOT_RESERVE, NO_ENTRIES) -> None
 * commit: lane.commit_marker's pure-Python twin (what commit_marker hands an unusual plan).
 * LookupError when a field type the lane reads was not made. */
PyObject *lane_setup(PyObject *self, PyObject *args) {
    PyObject *plan_cls, *e, *f, *k, *l, *v, *c, *t, *err, *none;
    long long acks, chain, garbage, runs, extras, bytes, exact, reserve;
    double share;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOLdLLLLLLLO!", &PyType_Type, &plan_cls, &e, &f, &k, &l, &v, &c, &t, &err,
                          &acks, &share, &chain, &garbage, &runs, &extras, &bytes, &exact, &reserve, &PyDict_Type,
                          &none))
        return NULL;
    if (reserve < 0 || reserve > 255) {
        PyErr_SetString(PyExc_ValueError, "lane_setup's slot reserve is 0..255 bytes");
        return NULL;
    }
    if (exact < 0 || exact >= KEPT_ROOM) { /* floor_after keeps at most KEPT_ROOM sequences */
        PyErr_Format(PyExc_ValueError, "lane_setup's EXACT_TRIM is %lld; allowed 0..%d", exact, KEPT_ROOM - 1);
        return NULL;
    }
    if (!PyType_Check(e) || !PyType_IsSubtype((PyTypeObject *)e, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "lane_setup needs a tuple type for index entries");
        return NULL;
    }
    for (int n = 0; n < N_COUNT; n++)
        if (name_str[n] == NULL && (name_str[n] = PyUnicode_InternFromString(names[n])) == NULL) return NULL;
    if (empty_set == NULL && (empty_set = PyFrozenSet_New(NULL)) == NULL) return NULL;
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL) return NULL;
    if (no_optimize == NULL && (no_optimize = Py_BuildValue("(s)", "optimize")) == NULL) return NULL;
    for (int a = 0; a < A_COUNT; a++) {
        Attr *at = &attrs[a];
        if (at->str == NULL && (at->str = PyUnicode_InternFromString(at->name)) == NULL) return NULL;
        const char *owner = owner_names[at->owner];
        at->type = NULL;
        Py_CLEAR(at->seen);
        if ((at->type = fields_type_named(owner)) == NULL) {
            PyErr_Format(PyExc_LookupError, "no field type %s was made (ackstore.fields declares them)", owner);
            return NULL;
        }
        at->offset = (Py_ssize_t)(sizeof(PyObject) + (size_t)at->index * sizeof(PyObject *));
    }
    if (chain < 1 || garbage < 1) {
        PyErr_Format(PyExc_ValueError, "lane_setup: SMALL_CHAIN %lld and GARBAGE_FACTOR %lld are at least 1", chain,
                     garbage);
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)plan_cls, attrs[P_CURSOR_ID].type)) {
        PyErr_SetString(PyExc_TypeError, "lane_setup's plan class derives from PlanFields");
        return NULL;
    }
    Py_XSETREF(plan_type, Py_NewRef(plan_cls));
    Py_XSETREF(entry_type, Py_NewRef(e));
    Py_XSETREF(frozen_type, Py_NewRef(f));
    Py_XSETREF(packb, Py_NewRef(k));
    Py_XSETREF(log_key_fn, Py_NewRef(l));
    Py_XSETREF(version, Py_NewRef(v));
    Py_XSETREF(fallback_commit, Py_NewRef(c));
    Py_XSETREF(trim_records_fn, Py_NewRef(t));
    Py_XSETREF(lmdb_error, Py_NewRef(err));
    Py_XSETREF(no_entries, Py_NewRef(none));
    max_acks = acks;
    max_share = share;
    chain_small = chain;
    chain_garbage = garbage;
    state_max_runs = runs;
    state_max_extras = extras;
    state_max_bytes = bytes;
    exact_trim = exact;
    slot_reserve = reserve;
    Py_RETURN_NONE;
}

/* chain.full_due(every): 1, 0, or -1 with an exception */
static int full_due(PyObject *chain, long long every) {
    int t;
    if ((t = truth(chain, A_FORCE_FULL)) != 0) return t;
    if ((t = truth(chain, A_TRUNCATED)) != 0) return t;
    long long seq = integer(chain, A_MARKER_SEQ), deltas, chain_bytes, full_bytes;
    if (FAILED(seq)) return -1;
    if (seq < 0) return 1;
    deltas = integer(chain, A_DELTAS);
    if (FAILED(deltas) || FAILED(chain_bytes = integer(chain, A_CHAIN_BYTES)) ||
        FAILED(full_bytes = integer(chain, A_FULL_BYTES)))
        return -1;
    return chain_outgrown(deltas, every, (unsigned long long)chain_bytes, (unsigned long long)full_bytes);
}

/* chain.trim_due(due): whether a full marker trims the log below it; -1 with an exception */
static int trim_due(PyObject *chain, int due) {
    if (due) return 1;
    long long untrimmed = integer(chain, A_UNTRIMMED), full_bytes;
    if (FAILED(untrimmed) || FAILED(full_bytes = integer(chain, A_FULL_BYTES))) return -1;
    return chain_garbage_due((unsigned long long)untrimmed, (unsigned long long)full_bytes);
}

/* lane.worth_a_delta: 1, 0, or -1. `counts` is NULL for a ledger without counts since its
 * base; else the ledger's counts, of which `live` were set since the base and still stand */
static int worth_a_delta(PyObject *added, PyObject *la, Py_ssize_t live, PyObject *counts) {
    Py_ssize_t n = PyObject_Size(added);
    if (n < 0) return -1;
    n += live;
    if (n > max_acks) return 0;
    if (counts == NULL) { /* a few acks against many ranges pass without counting its bitmap */
        long long runs = integer(la, A_RUNS);
        if (FAILED(runs)) return -1;
        if ((double)n <= max_share * (double)runs) return 1;
    }
    PyObject *bitmap = get(la, A_BITMAP);
    if (bitmap == NULL) return -1;
    Py_ssize_t size = PyObject_Size(bitmap);
    Py_DECREF(bitmap);
    if (size < 0) return -1;
    return (double)n <= max_share * (double)(size + (counts == NULL ? 0 : PyDict_GET_SIZE(counts)));
}

/* la.<a> when it is a dict (a new reference); NULL with an exception */
static PyObject *get_counts(PyObject *la, int a) {
    PyObject *d = get(la, a);
    if (d != NULL && !PyDict_Check(d)) {
        Py_SETREF(d, NULL);
        PyErr_SetString(PyExc_TypeError, "a ledger's counts are not dicts");
    }
    return d;
}

/* 1 when x is an int in [0, 2**64), its value in *out; else 0 (no exception) */
static int u64_of(PyObject *x, unsigned long long *out) {
    if (!PyLong_Check(x)) return 0;
    *out = PyLong_AsUnsignedLongLong(x);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* records.log_key(cid, seq): both big-endian u64; values outside them are handed to
 * log_key itself, which raises what it raises */
static PyObject *log_key(PyObject *cid, PyObject *seq) {
    unsigned long long c, s;
    if (!u64_of(cid, &c) || !u64_of(seq, &s)) {
        PyObject *args[2] = {cid, seq}, *key = PyObject_Vectorcall(log_key_fn, args, 2, NULL);
        if (key != NULL && !PyBytes_Check(key)) {
            Py_SETREF(key, NULL);
            PyErr_SetString(PyExc_TypeError, "log_key did not return bytes");
        }
        return key;
    }
    PyObject *key = PyBytes_FromStringAndSize(NULL, 16);
    if (key == NULL) return NULL;
    unsigned char *k = (unsigned char *)PyBytes_AS_STRING(key);
    for (int i = 0; i < 8; i++) {
        k[i] = (unsigned char)(c >> (56 - 8 * i));
        k[8 + i] = (unsigned char)(s >> (56 - 8 * i));
    }
    return key;
}

/* x + 1 */
static PyObject *plus_one(PyObject *x) {
    PyObject *one = PyLong_FromLong(1);
    if (one == NULL) return NULL;
    PyObject *r = PyNumber_Add(x, one);
    Py_DECREF(one);
    return r;
}

/* IndexEntry(seq, runs, adds, None), made as tuple.__new__ makes it */
static PyObject *index_entry(PyObject *seq, PyObject *runs, PyObject *adds, PyObject *counts) {
    PyTypeObject *type = (PyTypeObject *)entry_type;
    PyObject *entry = type->tp_alloc(type, 4);
    if (entry == NULL) return NULL;
    PyTuple_SET_ITEM(entry, 0, Py_NewRef(seq));
    PyTuple_SET_ITEM(entry, 1, Py_NewRef(runs));
    PyTuple_SET_ITEM(entry, 2, Py_NewRef(adds));
    PyTuple_SET_ITEM(entry, 3, Py_NewRef(counts));
    return entry;
}

/* lane.live_counts: a new dict of the items of counts_added whose entry is still in counts
 * (possibly empty; the caller reads an empty one as None) */
static PyObject *live_counts(PyObject *counts_added, PyObject *counts) {
    PyObject *live = PyDict_New(), *e, *n;
    Py_ssize_t pos = 0;
    if (live == NULL) return NULL;
    while (PyDict_Next(counts_added, &pos, &e, &n)) {
        int has = PyDict_Contains(counts, e);
        if (has < 0 || (has && PyDict_SetItem(live, e, n) < 0)) {
            Py_DECREF(live);
            return NULL;
        }
    }
    return live;
}

/* lane.counts_since(counts, named), counts a non-empty dict: counts itself when named is
 * None or empty, else a new dict of the items named does not hold alike, or None */
static PyObject *counts_since(PyObject *counts, PyObject *named) {
    if (named == Py_None || (PyDict_Check(named) && PyDict_GET_SIZE(named) == 0)) return Py_NewRef(counts);
    if (!PyDict_Check(named)) {
        PyErr_SetString(PyExc_TypeError, "an index entry's counts are not a dict");
        return NULL;
    }
    PyObject *since = PyDict_New(), *e, *n;
    Py_ssize_t pos = 0;
    if (since == NULL) return NULL;
    while (PyDict_Next(counts, &pos, &e, &n)) {
        PyObject *was = PyDict_GetItemWithError(named, e);
        int differs = was == NULL ? (PyErr_Occurred() ? -1 : 1) : PyObject_RichCompareBool(was, n, Py_NE);
        if (differs < 0 || (differs && PyDict_SetItem(since, e, n) < 0)) {
            Py_DECREF(since);
            return NULL;
        }
    }
    if (PyDict_GET_SIZE(since) == 0) Py_SETREF(since, Py_NewRef(Py_None));
    return since;
}

/* lane.prune_counts: the entries of la.counts_added no longer in la.counts removed; -1 with
 * an exception */
static int prune_counts(PyObject *la) {
    PyObject *added = get_counts(la, A_COUNTS_ADDED), *counts = NULL, *gone = NULL, *e, *n;
    Py_ssize_t pos = 0;
    int rc = -1;
    if (added == NULL || (counts = get_counts(la, A_COUNTS)) == NULL || (gone = PyList_New(0)) == NULL) goto done;
    while (PyDict_Next(added, &pos, &e, &n)) {
        int has = PyDict_Contains(counts, e);
        if (has < 0 || (!has && PyList_Append(gone, e) < 0)) goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(gone); i++)
        if (PyDict_DelItem(added, PyList_GET_ITEM(gone, i)) < 0) goto done;
    rc = 0;
done:
    Py_XDECREF(added); Py_XDECREF(counts); Py_XDECREF(gone);
    return rc;
}

/* A MarkerPlan with the fields its __init__ sets (without running it). */
static PyObject *marker_plan(PyObject *cid, PyObject *changes, int full, PyObject *seq, PyObject *taken,
                             PyObject *meta, PyObject *ranges, PyObject *key, PyObject *value) {
    PyTypeObject *type = (PyTypeObject *)plan_type;
    PyObject *plan = type->tp_alloc(type, 0), *puts = NULL, *pair = NULL;
    if (plan == NULL) return NULL;
    if ((pair = PyTuple_Pack(2, key, value)) == NULL || (puts = PyList_New(1)) == NULL) goto fail;
    PyList_SET_ITEM(puts, 0, pair);
    pair = NULL;
    if (set(plan, P_CURSOR_ID, cid) < 0 || set(plan, P_CHANGES, changes) < 0 ||
        set(plan, P_FULL, full ? Py_True : Py_False) < 0 || set(plan, P_MARKER_SEQ, seq) < 0 ||
        set(plan, P_PINNED, taken) < 0 || set(plan, P_META_DIRTY, meta) < 0 || set(plan, P_PERSISTED, ranges) < 0 ||
        set(plan, P_PUTS, puts) < 0 || set_ll(plan, P_MARKER_BYTES, PyBytes_GET_SIZE(value)) < 0 ||
        set_ll(plan, P_NBYTES, PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value)) < 0 ||
        set_ll(plan, P_GC_BELOW, -1) < 0 || set(plan, P_GC_LIVE, empty_set) < 0 || set(plan, P_TRIM_KEYS, Py_None) < 0 ||
        set(plan, P_FULL_LIVE, empty_tuple) < 0 || set(plan, P_DROPPED, empty_set) < 0 ||
        set(plan, P_TRUNCATED, Py_False) < 0 || set(plan, P_KEEP_DIRTY, empty_set) < 0)
        goto fail;
    Py_DECREF(puts);
    return plan;
fail:
    Py_XDECREF(pair);
    Py_XDECREF(puts);
    Py_DECREF(plan);
    return NULL;
}

/* what a full marker references: every entry's record in `whole`, and itself (a tuple) */
static PyObject *full_live(PyObject *whole, PyObject *seq) {
    PyObject *live, *k, *v;
    Py_ssize_t pos = 0, n = 0;
    while (PyDict_Next(whole, &pos, &k, &v)) n += v != Py_None;
    if ((live = PyTuple_New(n + 1)) == NULL) return NULL;
    pos = n = 0;
    while (PyDict_Next(whole, &pos, &k, &v)) {
        if (v == Py_None) continue;
        if (!PyTuple_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "an index entry is not a tuple");
            Py_DECREF(live);
            return NULL;
        }
        PyTuple_SET_ITEM(live, n++, Py_NewRef(PyTuple_GET_ITEM(v, 0)));
    }
    PyTuple_SET_ITEM(live, n, Py_NewRef(seq));
    return live;
}

#define FAIL(x) do { x; goto done; } while (0)
#define OTHER_IF(cond) do { if (cond) { result = Py_NewRef(Py_False); goto done; } } while (0)

/* What every plan the lane takes does last, having changed nothing before (lane._took):
 * the cursor's next sequence is past the plan's marker `seq`, its dirty set is empty (the
 * plan holds the ledgers it took, `taken` (taken_of), pinned until it ends: not
 * evictable) and so is its set of dropped ledgers when `dropped` (a state plan names
 * them), and the positions and properties are no longer changed. -1 with an exception. */
static int took(PyObject *pages, PyObject *state, PyObject *chain, PyObject *seq, PyObject *dirty, PyObject *taken,
                int dropped) {
    PyObject *next = plus_one(seq);
    int rc = next == NULL || set(chain, A_NEXT_SEQ, next) < 0 || PySet_Clear(dirty) < 0 ||
                     (dropped && set(pages, A_VANISHED, empty_set) < 0) || set(pages, A_PINNED, taken) < 0 ||
                     set(state, A_META_DIRTY, Py_False) < 0
                 ? -1
                 : 0;
    Py_XDECREF(next);
    return rc;
}

/* lane._taken(dirty, changes): `changes` (a new reference) when its keys are the dirty
 * set's members, else a copy of the set; NULL with an exception */
static PyObject *taken_of(PyObject *dirty, PyObject *changes) {
    Py_ssize_t n = PyAnySet_Check(dirty) ? PySet_GET_SIZE(dirty) : -1, pos = 0;
    if (n >= 0 && PyDict_Check(changes) && PyDict_GET_SIZE(changes) == n) {
        PyObject *ledger, *entry;
        int all = 1; /* as many, so the same when every key is a member (no iterator made) */
        while (all == 1 && PyDict_Next(changes, &pos, &ledger, &entry)) all = PySet_Contains(dirty, ledger);
        if (all < 0) return NULL;
        if (all) return Py_NewRef(changes);
    }
    return PySet_New(dirty);
}

/* whether `keep` (a tuple of ints, or any collection) holds the sequence `s`; -1 with an
 * exception */
static int kept_in(PyObject *keep, long long s) {
    if (PyTuple_CheckExact(keep)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keep); i++) {
            PyObject *x = PyTuple_GET_ITEM(keep, i);
            if (PyLong_CheckExact(x)) {
                int overflow;
                long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
                if (v == -1 && PyErr_Occurred()) return -1;
                if (!overflow && v == s) return 1;
                continue;
            }
            PyObject *seq = PyLong_FromLongLong(s);
            int eq = seq == NULL ? -1 : PyObject_RichCompareBool(x, seq, Py_EQ);
            Py_XDECREF(seq);
            if (eq != 0) return eq;
        }
        return 0;
    }
    PyObject *seq = PyLong_FromLongLong(s);
    int has = seq == NULL ? -1 : PySequence_Contains(keep, seq);
    Py_XDECREF(seq);
    return has;
}

/* lane.live_records(chain, index): the full marker's records and every record the index
 * names, as a frozenset (what a trim keeps); NULL with an exception */
static PyObject *live_records(PyObject *chain, PyObject *pages) {
    PyObject *full = get(chain, A_FULL_LIVE), *index = full == NULL ? NULL : get(pages, A_INDEX), *seqs = NULL,
             *out = NULL, *k, *e;
    Py_ssize_t pos = 0;
    if (index == NULL || (seqs = PySet_New(full)) == NULL) goto done;
    if (!PyDict_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "a cursor's index is a dict");
        goto done;
    }
    while (PyDict_Next(index, &pos, &k, &e)) {
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 1) {
            PyErr_SetString(PyExc_TypeError, "an index entry is a tuple");
            goto done;
        }
        if (PySet_Add(seqs, PyTuple_GET_ITEM(e, 0)) < 0) goto done;
    }
    out = PyFrozenSet_New(seqs);
done:
    Py_XDECREF(full);
    Py_XDECREF(index);
    Py_XDECREF(seqs);
    return out;
}

/* lane.trims: `plan` trims the log below the chain's full marker, keeping `keep`; with
 * the keys to delete when the chain's floor is at most EXACT_TRIM below: those of the
 * chain's kept sequences `keep` no longer names, then those of the sequences from the
 * floor below the bound that it does not name. -1 with an exception. */
static int trims(PyObject *plan, PyObject *chain, PyObject *keep) {
    PyObject *below = get(chain, A_FULL_SEQ), *keys = NULL, *cid = NULL, *kept = NULL;
    long long stack[32], *gone = stack;
    int rc = -1;
    if (below == NULL || set(plan, P_GC_BELOW, below) < 0 || set(plan, P_GC_LIVE, keep) < 0) goto done;
    long long b = PyLong_AsLongLong(below), floor = integer(chain, A_FLOOR);
    if ((b == -1 || floor == -1) && PyErr_Occurred()) goto done;
    if (floor < 0 || b - floor > exact_trim) {
        rc = 0;
        goto done;
    }
    if ((cid = get(plan, P_CURSOR_ID)) == NULL || (kept = get(chain, A_KEPT)) == NULL) goto done;
    if (!PyTuple_Check(kept)) FAIL(PyErr_SetString(PyExc_TypeError, "a chain's kept sequences are a tuple"));
    /* the sequences to delete: counted first (a few, on the stack), then one tuple of keys */
    Py_ssize_t room = PyTuple_GET_SIZE(kept) + (Py_ssize_t)(b > floor ? b - floor : 0), n = 0;
    if (room > (Py_ssize_t)(sizeof stack / sizeof *stack) && (gone = PyMem_Malloc(room * sizeof *gone)) == NULL)
        FAIL(PyErr_NoMemory());
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kept); i++) {
        long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(kept, i));
        int k = FAILED(s) ? -1 : kept_in(keep, s);
        if (k < 0) goto done;
        if (!k) gone[n++] = s;
    }
    for (long long s = floor; s < b; s++) {
        int k = kept_in(keep, s);
        if (k < 0) goto done;
        if (!k) gone[n++] = s;
    }
    if ((keys = PyTuple_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *seq = PyLong_FromLongLong(gone[i]), *key = seq == NULL ? NULL : log_key(cid, seq);
        Py_XDECREF(seq);
        if (key == NULL) goto done;
        PyTuple_SET_ITEM(keys, i, key);
    }
    if (set(plan, P_TRIM_KEYS, keys) == 0) rc = 0;
done:
    if (gone != stack) PyMem_Free(gone);
    Py_XDECREF(below);
    Py_XDECREF(keys);
    Py_XDECREF(cid);
    Py_XDECREF(kept);
    return rc;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* lane.floor_after: the chain's floor and kept sequences once a trim below `below` that
 * kept `keep` ran: `below` and the ones of `keep` under it (ascending) while they are at
 * most EXACT_TRIM, else the lowest of them and none; `was` (the chain's kept tuple before)
 * when they are the same. The floor, its kept tuple in *kept_out (a new reference); -1
 * with an exception set. */
static long long floor_after(long long below, PyObject *keep, PyObject *was, PyObject **kept_out) {
    PyObject *it = PyObject_GetIter(keep), *x;
    long long low[KEPT_ROOM], lowest = below, floor = below;
    Py_ssize_t n = 0; /* how many are under `below`; the first KEPT_ROOM of them in `low` */
    *kept_out = NULL;
    if (it == NULL) return -1;
    while ((x = PyIter_Next(it)) != NULL) {
        long long v = PyLong_AsLongLong(x);
        Py_DECREF(x);
        if (FAILED(v)) break;
        if (v >= below) continue;
        if (n < KEPT_ROOM) low[n] = v;
        if (v < lowest) lowest = v;
        n++;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return -1;
    if (n > exact_trim) { /* more than a few: the floor is the lowest, kept none */
        floor = lowest;
        n = 0;
    }
    qsort(low, n, sizeof *low, cmp_ll);
    int same = PyTuple_Check(was) && PyTuple_GET_SIZE(was) == n;
    for (Py_ssize_t i = 0; same == 1 && i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(was, i));
        same = FAILED(v) ? -1 : v == low[i];
    }
    PyObject *kept = same < 0 ? NULL : same ? Py_NewRef(was) : PyTuple_New(n);
    for (Py_ssize_t i = 0; kept != NULL && !same && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(low[i]);
        if (v == NULL) Py_CLEAR(kept);
        else PyTuple_SET_ITEM(kept, i, v);
    }
    *kept_out = kept;
    return kept == NULL ? -1 : floor;
}

/* lane.small(pages, state): 1, 0, or -1 with an exception */
static int small(PyObject *pages, PyObject *state) {
    int t = truth(pages, A_SWAPPED);
    if (t != 0) return t < 0 ? -1 : 0;
    long long count = integer(state, A_RANGE_COUNT);
    if (FAILED(count)) return -1;
    if (count > state_max_runs) return 0;
    PyObject *loaded = get(pages, A_LOADED), *ledger, *la;
    if (loaded == NULL) return -1;
    if (!PyDict_Check(loaded)) {
        Py_DECREF(loaded);
        PyErr_SetString(PyExc_TypeError, "pages are not dicts");
        return -1;
    }
    Py_ssize_t pos = 0, extras = 0;
    int rc = 1;
    while (rc == 1 && PyDict_Next(loaded, &pos, &ledger, &la)) {
        PyObject *batches = get(la, A_BATCHES), *counts = batches == NULL ? NULL : get(la, A_COUNTS);
        Py_ssize_t nb = batches == NULL ? -1 : PyObject_Size(batches), nc = counts == NULL ? -1 : PyObject_Size(counts);
        Py_XDECREF(batches);
        Py_XDECREF(counts);
        if (nb < 0 || nc < 0) rc = -1;
        else extras += nb + nc;
    }
    Py_DECREF(loaded);
    return rc < 0 ? -1 : extras <= state_max_extras;
}

/* lane._take_state(planner), `some`: whether the dirty set holds a ledger (the caller read
 * them): the state marker plan, None, or False (OTHER: the state is outside the layout or
 * over STATE_MAX_BYTES); NULL with an exception. Changes nothing until the plan is made. */
static PyObject *take_state(PyObject *planner, PyObject *pages, PyObject *state, PyObject *chain, PyObject *dirty,
                            int some) {
    PyObject *result = NULL, *vanished = NULL, *index = NULL, *loaded = NULL, *dropped = NULL, *meta = NULL,
             *md = NULL, *props = NULL, *props_bytes = NULL, *cid = NULL, *keys = NULL, *value = NULL, *seq = NULL,
             *changes = NULL, *taken = NULL, *ranges = NULL, *key = NULL, *plan = NULL, *live = NULL, *keep = NULL,
             *ledger, *la;
    /* the loaded ledgers in order, and each one's ack state and fields (new references);
     * a cursor of one ledger (most) needs no list of them */
    PyObject *one[5] = {NULL, NULL, NULL, NULL, NULL}, **fields = one;
    Py_ssize_t pos, n = 0, got = 0;
    int t, any_vanished, meta_dirty;
    long long slot = -1, held = 0; /* the state slot it goes to (-1: its log key), which hold a value */
    if ((vanished = get(pages, A_VANISHED)) == NULL || (index = get(pages, A_INDEX)) == NULL ||
        (loaded = get(pages, A_LOADED)) == NULL)
        goto done;
    if (!PyDict_Check(loaded) || !PyDict_Check(index)) FAIL(PyErr_SetString(PyExc_TypeError, "pages are not dicts"));
    if ((any_vanished = PyObject_IsTrue(vanished)) < 0) goto done;
    if (any_vanished) { /* the dropped ledgers a marker named */
        PyObject *it = PyObject_GetIter(vanished), *l;
        if (it == NULL || (dropped = PyList_New(0)) == NULL) {
            Py_XDECREF(it);
            goto done;
        }
        while ((l = PyIter_Next(it)) != NULL) {
            int has = PyDict_Contains(index, l);
            t = has < 0 || (has && PyList_Append(dropped, l) < 0);
            Py_DECREF(l);
            if (t) break;
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) goto done;
    }
    if ((meta = get(state, A_META_DIRTY)) == NULL || (meta_dirty = PyObject_IsTrue(meta)) < 0) goto done;
    if (!some && (dropped == NULL || PyList_GET_SIZE(dropped) == 0) && !meta_dirty) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* the state marker: the ledgers in order, each (ledger, bitmap, batches, counts) */
    if ((md = get(state, A_MD)) == NULL || (props = get(state, A_PROPERTIES)) == NULL ||
        (cid = get(planner, A_CURSOR_ID)) == NULL)
        goto done;
    if (!PyTuple_Check(md) || PyTuple_GET_SIZE(md) != 2)
        FAIL(PyErr_SetString(PyExc_TypeError, "the mark-delete position is not a (ledger, entry) tuple"));
    n = PyDict_GET_SIZE(loaded);
    if (n > 1) {
        if ((keys = PyDict_Keys(loaded)) == NULL || PyList_Sort(keys) < 0) goto done;
        if ((fields = PyMem_Calloc(5 * n, sizeof(PyObject *))) == NULL) FAIL(PyErr_NoMemory());
    }
    for (Py_ssize_t i = 0; i < n; i++, got++) { /* fields[i], [n + i] .. [4n + i]: ledger, la, bitmap, batches, counts */
        pos = 0;
        if (keys == NULL) {
            if (!PyDict_Next(loaded, &pos, &ledger, &la))
                FAIL(PyErr_SetString(PyExc_RuntimeError, "a loaded ledger left the pages"));
        } else {
            ledger = PyList_GET_ITEM(keys, i);
            if ((la = PyDict_GetItemWithError(loaded, ledger)) == NULL) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a loaded ledger left the pages");
                goto done;
            }
        }
        fields[i] = Py_NewRef(ledger);
        fields[n + i] = Py_NewRef(la);
        if ((fields[2 * n + i] = get(la, A_BITMAP)) == NULL || (fields[3 * n + i] = get(la, A_BATCHES)) == NULL ||
            (fields[4 * n + i] = get(la, A_COUNTS)) == NULL) {
            got++;
            goto done;
        }
    }
    if ((t = PyObject_IsTrue(props)) < 0) goto done;
    props_bytes = t ? PyObject_CallOneArg(packb, props) : PyBytes_FromStringAndSize(NULL, 0);
    if (props_bytes != NULL)
        value = state_marker_of(version, cid, PyTuple_GET_ITEM(md, 0), PyTuple_GET_ITEM(md, 1), n, fields,
                                fields + 2 * n, fields + 3 * n, fields + 4 * n, props_bytes, 0);
    if (value == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
        PyErr_Clear(); /* a field outside the layout: the marker layout takes it */
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (PyBytes_GET_SIZE(value) > state_max_bytes) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    /* the plan: every ledger's record is this marker; the dropped ones leave the index */
    if ((seq = get(chain, A_NEXT_SEQ)) == NULL || (changes = PyDict_New()) == NULL) goto done;
    /* where it goes (lane.state_slot): the state slot the newest state is not in, or its
     * log key when the cursor keeps history (its points name their markers by log key) */
    {
        long long hist = integer(planner, A_HISTORY);
        if (FAILED(hist)) goto done;
        if (hist == 0) {
            long long last = integer(chain, A_SLOT);
            if (FAILED(last) || FAILED(held = integer(chain, A_SLOTS))) goto done;
            Py_ssize_t room;
            slot = next_slot((int)last, (int)held, (Py_ssize_t)slot_reserve, &room);
            unsigned long long c = PyLong_AsUnsignedLongLong(cid), s = PyLong_AsUnsignedLongLong(seq);
            if (PyErr_Occurred()) goto done;
            PyObject *sealed = sealed_slot(c, (int)slot, s, value, room, &key);
            if (sealed == NULL) goto done;
            Py_SETREF(value, sealed);
        }
    }
    for (Py_ssize_t i = 0; dropped != NULL && i < PyList_GET_SIZE(dropped); i++)
        if (PyDict_SetItem(changes, PyList_GET_ITEM(dropped, i), Py_None) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) { /* in order, as the marker holds them */
        PyObject *runs = get(fields[n + i], A_RUNS), *entry = runs == NULL ? NULL : index_entry(seq, runs, Py_None, Py_None);
        t = entry == NULL ? -1 : PyDict_SetItem(changes, fields[i], entry);
        Py_XDECREF(runs);
        Py_XDECREF(entry);
        if (t < 0) goto done;
    }
    if ((taken = taken_of(dirty, changes)) == NULL || (ranges = get(state, A_RANGE_COUNT)) == NULL ||
        (key == NULL && (key = log_key(cid, seq)) == NULL) ||
        (plan = marker_plan(cid, changes, 1, seq, taken, meta, ranges, key, value)) == NULL)
        goto done;
    if (any_vanished && set(plan, P_DROPPED, vanished) < 0) goto done; /* what an abort gives back */
    if ((live = PyTuple_Pack(1, seq)) == NULL || set(plan, P_FULL_LIVE, live) < 0 ||
        (keep = get(chain, A_FULL_LIVE)) == NULL || trims(plan, chain, keep) < 0)
        goto done;
    if (slot >= 0) { /* the state before is the other slot's, or there is none (a new cursor's first):
                      * the log's keys hold nothing below this one */
        PyObject *named = get(plan, P_TRIM_KEYS);
        long long full = named == NULL ? -1 : integer(chain, A_FULL_SEQ), s;
        Py_ssize_t n_keep = FAILED(full) ? -1 : PyObject_Size(keep);
        if (n_keep < 0) t = -1;
        else if (named == Py_None || n_keep > 1) t = 0; /* a scan's trim, or more kept below this state */
        else t = n_keep == 0 ? 1 : kept_in(keep, full);
        Py_XDECREF(named);
        if (t < 0) goto done;
        if (t && (FAILED(s = PyLong_AsLongLong(seq)) || set_ll(plan, P_GC_BELOW, s + 1) < 0 ||
                  set(plan, P_GC_LIVE, empty_tuple) < 0))
            goto done;
    }
    /* nothing above changed the cursor; now the plan takes what it carries */
    pos = 0;
    while (PyDict_Next(loaded, &pos, &ledger, &la)) {
        PyObject *counts_added;
        if (set(la, A_ADDED, Py_None) < 0 || (counts_added = get(la, A_COUNTS_ADDED)) == NULL) goto done;
        t = PyObject_IsTrue(counts_added);
        Py_DECREF(counts_added);
        if (t > 0) t = set(la, A_COUNTS_ADDED, no_entries);
        if (t < 0) goto done;
    }
    if (slot >= 0 && (set_ll(chain, A_SLOT, slot) < 0 || set_ll(chain, A_SLOTS, held | 1LL << slot) < 0)) goto done;
    if (took(pages, state, chain, seq, dirty, taken, any_vanished) < 0) goto done;
    result = Py_NewRef(plan);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        for (int f = 0; f < 5; f++) Py_XDECREF(fields[f * n + i]);
    if (fields != one) PyMem_Free(fields);
    Py_XDECREF(vanished); Py_XDECREF(index); Py_XDECREF(loaded); Py_XDECREF(dropped); Py_XDECREF(meta);
    Py_XDECREF(md); Py_XDECREF(props); Py_XDECREF(props_bytes); Py_XDECREF(cid); Py_XDECREF(keys);
    Py_XDECREF(value); Py_XDECREF(seq); Py_XDECREF(changes); Py_XDECREF(taken);
    Py_XDECREF(ranges); Py_XDECREF(key); Py_XDECREF(plan); Py_XDECREF(live); Py_XDECREF(keep);
    return result;
}

/* take_marker(planner) -> MarkerPlan | None | False: lane._take_marker */
PyObject *take_marker(PyObject *self, PyObject *planner) {
    if (ready("take_marker", "take_marker(planner)", 1, 1) < 0) return NULL;
    PyObject *result = NULL, *pages = NULL, *state = NULL, *chain = NULL, *dirty = NULL,
             *loaded = NULL, *index = NULL, *changes = NULL, *items = NULL, *marker_items = NULL, *whole = NULL,
             *ledgers = NULL, *md = NULL, *props = NULL, *props_bytes = NULL, *cid = NULL, *prev = NULL,
             *rp_e = NULL, *flags = NULL, *value = NULL, *seq = NULL, *taken = NULL, *meta = NULL, *ranges = NULL,
             *key = NULL, *plan = NULL, *next = NULL, *live = NULL, *counted = NULL;
    int t, some, unmarked, vanished;
    if ((pages = get(planner, A_PAGES)) == NULL || (state = get(planner, A_STATE)) == NULL ||
        (chain = get(planner, A_CHAIN)) == NULL || (dirty = get(pages, A_DIRTY)) == NULL)
        goto done;
    if (!PySet_Check(dirty)) FAIL(PyErr_SetString(PyExc_TypeError, "the dirty ledgers are not a set"));
    /* an idle cursor: nothing to flush */
    if ((some = PyObject_IsTrue(dirty)) < 0 || (unmarked = truth(pages, A_UNMARKED)) < 0 ||
        (vanished = truth(pages, A_VANISHED)) < 0)
        goto done;
    if (!some && !unmarked && !vanished) {
        if ((t = truth(state, A_META_DIRTY)) < 0) goto done;
        if (!t) { result = Py_NewRef(Py_None); goto done; }
    }
    OTHER_IF(unmarked);
    if ((t = truth(chain, A_OVER_CAP)) < 0) goto done;
    OTHER_IF(t);
    long long limit = integer(planner, A_CAP), every;
    if (FAILED(limit)) goto done;
    if (limit) {
        long long count = integer(state, A_RANGE_COUNT);
        if (FAILED(count)) goto done;
        OTHER_IF(count > limit);
    }
    if ((t = small(pages, state)) < 0) goto done;
    if (t) { /* the state layout */
        PyObject *taken = take_state(planner, pages, state, chain, dirty, some);
        if (taken == NULL) goto done;
        if (taken != Py_False) { result = taken; goto done; }
        Py_DECREF(taken);
    }
    OTHER_IF(vanished);
    if (FAILED(every = integer(planner, A_FULL_EVERY))) goto done;
    int due = full_due(chain, every);
    if (due < 0) goto done;
    if ((loaded = get(pages, A_LOADED)) == NULL || (index = get(pages, A_INDEX)) == NULL) goto done;
    if (!PyDict_Check(loaded) || !PyDict_Check(index)) FAIL(PyErr_SetString(PyExc_TypeError, "pages are not dicts"));
    if ((changes = PyDict_New()) == NULL || (items = PyList_New(0)) == NULL || (counted = PyList_New(0)) == NULL)
        goto done;
    /* the dirty ledgers in order: the one of a set of one without making a list */
    PyObject *single[1], **order = single;
    Py_ssize_t count = PySet_GET_SIZE(dirty);
    if (count == 1) {
        PyObject *it = PyObject_GetIter(dirty);
        ledgers = it == NULL ? NULL : PyIter_Next(it); /* kept alive while the loop runs */
        Py_XDECREF(it);
        if (ledgers == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a set of one is empty");
            goto done;
        }
        single[0] = ledgers;
    } else if (count > 1) {
        if ((ledgers = PySequence_List(dirty)) == NULL || PyList_Sort(ledgers) < 0) goto done;
        order = PySequence_Fast_ITEMS(ledgers);
    }
    long long named = 0; /* u32s the chain named already: what a full marker writes beyond the delta */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *ledger = order[i], *la, *base = NULL, *added = NULL, *adds = NULL, *runs = NULL,
                 *entry = NULL, *item = NULL, *counts_added = NULL, *counts = NULL, *alive = NULL, *since = NULL,
                 *mentry = NULL;
        int ok = -1;
        if ((la = PyDict_GetItemWithError(loaded, ledger)) == NULL && PyErr_Occurred()) goto done;
        if (la != NULL && (base = PyDict_GetItemWithError(index, ledger)) == NULL && PyErr_Occurred()) goto done;
        OTHER_IF(la == NULL || base == NULL);
        if (!PyTuple_Check(base) || PyTuple_GET_SIZE(base) < 4)
            FAIL(PyErr_SetString(PyExc_TypeError, "an index entry is not (seq, runs, adds, counts)"));
        Py_INCREF(la); /* borrowed from dicts that the calls below could change */
        Py_INCREF(base);
        if ((added = get(la, A_ADDED)) == NULL) goto next;
        if (added == Py_None) { ok = 0; goto next; }
        if ((counts_added = get_counts(la, A_COUNTS_ADDED)) == NULL) goto next;
        if (PyDict_GET_SIZE(counts_added)) { /* counts since the base: the ones that still stand */
            if ((counts = get_counts(la, A_COUNTS)) == NULL || (alive = live_counts(counts_added, counts)) == NULL ||
                PyList_Append(counted, la) < 0)
                goto next;
            ok = worth_a_delta(added, la, PyDict_GET_SIZE(alive), counts);
            if (PyDict_GET_SIZE(alive) == 0) Py_SETREF(alive, Py_NewRef(Py_None));
        } else {
            alive = Py_NewRef(Py_None);
            ok = worth_a_delta(added, la, 0, NULL);
        }
        if (ok != 1) goto next;
        ok = -1;
        PyObject *frozen_args[2] = {added, Py_False};
        if ((adds = PyObject_Vectorcall(frozen_type, frozen_args, 1, no_optimize)) == NULL ||
            (runs = get(la, A_RUNS)) == NULL ||
            (entry = index_entry(PyTuple_GET_ITEM(base, 0), runs, adds, alive)) == NULL ||
            PyDict_SetItem(changes, ledger, entry) < 0)
            goto next;
        PyObject *base_adds = PyTuple_GET_ITEM(base, 2);
        int has = base_adds == Py_None ? 0 : PyObject_IsTrue(base_adds);
        Py_ssize_t n = has > 0 ? PyObject_Size(base_adds) : 0;
        if (has < 0 || n < 0) goto next;
        named += n;
        mentry = Py_NewRef(entry);
        if (alive != Py_None) { /* the delta names the counts set since the chain named them */
            if ((since = counts_since(alive, PyTuple_GET_ITEM(base, 3))) == NULL) goto next;
            named += 2 * (PyDict_GET_SIZE(alive) - (since == Py_None ? 0 : PyDict_GET_SIZE(since)));
            if (since != alive) {
                Py_SETREF(mentry, index_entry(PyTuple_GET_ITEM(base, 0), runs, adds, since));
                if (mentry == NULL) goto next;
            }
        }
        if ((item = PyTuple_Pack(3, ledger, mentry, base_adds)) == NULL || PyList_Append(items, item) < 0) goto next;
        ok = 1;
    next:
        Py_XDECREF(added); Py_XDECREF(adds); Py_XDECREF(runs); Py_XDECREF(entry); Py_XDECREF(item);
        Py_XDECREF(counts_added); Py_XDECREF(counts); Py_XDECREF(alive); Py_XDECREF(since); Py_XDECREF(mentry);
        Py_DECREF(la); Py_DECREF(base);
        if (ok < 0) goto done;
        OTHER_IF(ok == 0);
    }
    int covering = PyDict_GET_SIZE(changes) == PyDict_GET_SIZE(index);
    int full = chain_full_marker(due, covering, (unsigned long long)named);
    whole = Py_NewRef(changes);
    marker_items = Py_NewRef(items);
    if (full) {
        if ((t = truth(chain, A_FORCE_FULL)) < 0) goto done;
        OTHER_IF(t);
        if ((t = truth(chain, A_TRUNCATED)) < 0) goto done;
        OTHER_IF(t);
        long long seq0 = integer(chain, A_MARKER_SEQ);
        if (FAILED(seq0)) goto done;
        OTHER_IF(seq0 < 0);
        Py_CLEAR(marker_items);
        if (covering) { /* in order already */
            if ((marker_items = PyList_New(PyList_GET_SIZE(items))) == NULL) goto done;
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
                /* the ledger's whole change (an item's entry names only the counts since
                 * the chain named them) */
                PyObject *ledger = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
                PyObject *entry = PyDict_GetItemWithError(changes, ledger), *pair;
                if (entry == NULL) {
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "a changed ledger left the changes");
                    goto done;
                }
                if ((pair = PyTuple_Pack(2, ledger, entry)) == NULL) goto done;
                PyList_SET_ITEM(marker_items, i, pair);
            }
        } else {
            Py_SETREF(whole, PyDict_Copy(index));
            if (whole == NULL || PyDict_Update(whole, changes) < 0) goto done;
            if ((marker_items = PyDict_Items(whole)) == NULL || PyList_Sort(marker_items) < 0) goto done;
        }
    }
    if ((md = get(state, A_MD)) == NULL || (props = get(state, A_PROPERTIES)) == NULL ||
        (cid = get(planner, A_CURSOR_ID)) == NULL || (prev = get(chain, A_MARKER_SEQ)) == NULL)
        goto done;
    if (!PyTuple_Check(md) || PyTuple_GET_SIZE(md) != 2)
        FAIL(PyErr_SetString(PyExc_TypeError, "the mark-delete position is not a (ledger, entry) tuple"));
    if ((t = PyObject_IsTrue(props)) < 0) goto done;
    if ((props_bytes = t ? PyObject_CallOneArg(packb, props) : PyBytes_FromStringAndSize(NULL, 0)) == NULL ||
        (rp_e = plus_one(PyTuple_GET_ITEM(md, 1))) == NULL || (flags = PyLong_FromLong(full ? 1 : 0)) == NULL)
        goto done;
    {
        PyObject *args[10] = {version, flags, prev, PyTuple_GET_ITEM(md, 0), PyTuple_GET_ITEM(md, 1),
                              PyTuple_GET_ITEM(md, 0), rp_e, cid, marker_items, props_bytes};
        value = fixed_marker(NULL, args, 10);
    }
    if (value == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
        PyErr_Clear(); /* the general path writes the msgpack form */
        result = Py_NewRef(Py_False);
        goto done;
    }
    if ((seq = get(chain, A_NEXT_SEQ)) == NULL ||
        (meta = get(state, A_META_DIRTY)) == NULL || (ranges = get(state, A_RANGE_COUNT)) == NULL)
        goto done;
    if ((key = log_key(cid, seq)) == NULL) goto done;
    if ((taken = taken_of(dirty, changes)) == NULL ||
        (plan = marker_plan(cid, changes, full, seq, taken, meta, ranges, key, value)) == NULL)
        goto done;
    if (full) {
        if ((live = full_live(whole, seq)) == NULL || set(plan, P_FULL_LIVE, live) < 0) goto done;
        int trim = trim_due(chain, due);
        if (trim < 0) goto done;
        if (trim) {
            PyObject *keep = live_records(chain, pages);
            t = keep == NULL ? -1 : trims(plan, chain, keep);
            Py_XDECREF(keep);
            if (t < 0) goto done;
        }
    }
    /* nothing above changed the cursor; now the plan takes what it carries */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(counted); i++)
        if (prune_counts(PyList_GET_ITEM(counted, i)) < 0) goto done;
    if (took(pages, state, chain, seq, dirty, taken, 0) < 0) goto done;
    result = Py_NewRef(plan);
done:
    Py_XDECREF(pages); Py_XDECREF(state); Py_XDECREF(chain); Py_XDECREF(dirty);
    Py_XDECREF(loaded); Py_XDECREF(index); Py_XDECREF(changes); Py_XDECREF(items); Py_XDECREF(marker_items);
    Py_XDECREF(whole); Py_XDECREF(ledgers); Py_XDECREF(md); Py_XDECREF(props); Py_XDECREF(props_bytes);
    Py_XDECREF(cid); Py_XDECREF(prev); Py_XDECREF(rp_e); Py_XDECREF(flags); Py_XDECREF(value); Py_XDECREF(seq);
    Py_XDECREF(taken); Py_XDECREF(meta); Py_XDECREF(ranges); Py_XDECREF(key); Py_XDECREF(plan);
    Py_XDECREF(next); Py_XDECREF(live); Py_XDECREF(counted);
    return result;
}

/* obj.<a> += plus (Python ints); -1 with an exception */
static int add_to(PyObject *obj, int a, PyObject *plus) {
    PyObject *v = get(obj, a), *sum;
    if (v == NULL) return -1;
    sum = PyNumber_Add(v, plus);
    Py_DECREF(v);
    if (sum == NULL) return -1;
    int r = set(obj, a, sum);
    Py_DECREF(sum);
    return r;
}

/* commit_marker(planner, plan) -> None: lane._commit_marker, for a plan that keeps nothing
 * dirty (what take_marker makes); any other is handed to the pure-Python function. */
PyObject *commit_marker(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("commit_marker", "commit_marker(planner, plan)", nargs, 2) < 0) return NULL;
    PyObject *planner = args[0], *plan = args[1], *result = NULL, *pages = NULL, *chain = NULL, *changes = NULL,
             *index = NULL, *unmarked = NULL, *keep = NULL, *seq = NULL, *nbytes = NULL, *mbytes = NULL,
             *v = NULL, *one = NULL, *zero = NULL, *loaded = NULL, *swapped = NULL;
    int t;
    if ((changes = get(plan, P_CHANGES)) == NULL || (keep = get(plan, P_KEEP_DIRTY)) == NULL) goto done;
    if ((t = PyObject_IsTrue(keep)) < 0) goto done;
    if (t || !PyDict_Check(changes)) { /* the pure-Python twin knows every case */
        result = PyObject_Vectorcall(fallback_commit, args, 2, NULL);
        goto done;
    }
    if ((pages = get(planner, A_PAGES)) == NULL || (chain = get(planner, A_CHAIN)) == NULL ||
        (index = get(pages, A_INDEX)) == NULL || (unmarked = get(pages, A_UNMARKED)) == NULL)
        goto done;
    /* pages.adopt(changes, keep_dirty): a ledger dropped and made again since keeps what it
     * has, and one written back since keeps its newer record */
    {
        PyObject *k, *e;
        Py_ssize_t pos = 0;
        while (PyDict_Next(changes, &pos, &k, &e)) {
            if (e == Py_None) { /* dropped: forgotten unless it holds state again */
                if (loaded == NULL && ((loaded = get(pages, A_LOADED)) == NULL || (swapped = get(pages, A_SWAPPED)) == NULL))
                    goto done;
                if ((t = PySequence_Contains(loaded, k)) == 0) t = PySequence_Contains(swapped, k);
                if (t < 0) goto done;
                if (!t && PyObject_DelItem(index, k) < 0) { /* index.pop(ledger, None) */
                    if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto done;
                    PyErr_Clear();
                }
                continue;
            }
            t = PyAnySet_Check(unmarked) && PySet_GET_SIZE(unmarked) == 0 ? 0 : PySequence_Contains(unmarked, k);
            if (t < 0) goto done;
            if (!t && PyObject_SetItem(index, k, e) < 0) goto done;
        }
    }
    if (set(pages, A_PINNED, empty_set) < 0) goto done;
    /* chain.adopt(plan) */
    if ((v = get(plan, P_TRUNCATED)) == NULL || set(chain, A_TRUNCATED, v) < 0)
        goto done;
    Py_CLEAR(v);
    if ((v = get(plan, P_PERSISTED)) == NULL || set(chain, A_PERSISTED, v) < 0) goto done;
    Py_CLEAR(v);
    if ((seq = get(plan, P_MARKER_SEQ)) == NULL || set(chain, A_MARKER_SEQ, seq) < 0) goto done;
    if ((mbytes = get(plan, P_MARKER_BYTES)) == NULL || (nbytes = get(plan, P_NBYTES)) == NULL) goto done;
    if ((t = truth(plan, P_FULL)) < 0) goto done;
    if ((zero = PyLong_FromLong(0)) == NULL || (one = PyLong_FromLong(1)) == NULL) goto done;
    if (t) {
        if (set(chain, A_FULL_SEQ, seq) < 0 || (v = get(plan, P_FULL_LIVE)) == NULL || set(chain, A_FULL_LIVE, v) < 0 ||
            set(chain, A_DELTAS, zero) < 0 || set(chain, A_CHAIN_BYTES, zero) < 0 ||
            set(chain, A_FULL_BYTES, mbytes) < 0 || set(chain, A_FORCE_FULL, Py_False) < 0)
            goto done;
        Py_CLEAR(v);
    } else if (add_to(chain, A_DELTAS, one) < 0 || add_to(chain, A_CHAIN_BYTES, mbytes) < 0) {
        goto done;
    }
    long long below = integer(plan, P_GC_BELOW);
    if (FAILED(below)) goto done;
    if (below >= 0) { /* trimmed: below it, only what the trim kept */
        long long low;
        PyObject *kept = NULL, *was = get(chain, A_KEPT);
        if (was == NULL) goto done;
        low = (v = get(plan, P_GC_LIVE)) == NULL ? -1 : floor_after(below, v, was, &kept);
        Py_DECREF(was);
        if (v == NULL || FAILED(low) ||
            set(chain, A_UNTRIMMED, zero) < 0 || set_ll(chain, A_FLOOR, low) < 0 || set(chain, A_KEPT, kept) < 0) {
            Py_XDECREF(kept);
            goto done;
        }
        Py_DECREF(kept);
        Py_CLEAR(v);
    } else if (add_to(chain, A_UNTRIMMED, nbytes) < 0) {
        goto done;
    }
    if (add_to(chain, A_FLUSHES, one) < 0 || set(chain, A_LAST_BYTES, nbytes) < 0 ||
        add_to(chain, A_TOTAL_BYTES, nbytes) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(pages); Py_XDECREF(chain); Py_XDECREF(changes); Py_XDECREF(index); Py_XDECREF(unmarked);
    Py_XDECREF(keep); Py_XDECREF(seq); Py_XDECREF(nbytes); Py_XDECREF(mbytes); Py_XDECREF(v); Py_XDECREF(one);
    Py_XDECREF(zero); Py_XDECREF(loaded); Py_XDECREF(swapped);
    return result;
}

/* take_all(cursors_in, planners_in, plans, cursors, planners, idle, others) -> None:
 * lane._take_all (the plan take_marker takes of each visited cursor, with its planner at the
 * same place; a cursor it leaves to the general path goes to `others` with its planner, an
 * idle one to `idle`; appended as it goes, so the caller knows which cursor failed) */
PyObject *take_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("take_all", "take_all(cursors_in, planners_in, plans, cursors, planners, idle, others)", nargs, 7) < 0)
        return NULL;
    PyObject *visit = args[0], *from = args[1], *plans = args[2], *cursors = args[3], *planners = args[4],
             *idle = args[5], *others = args[6];
    if (!PyList_Check(visit) || !PyList_Check(from) || !PyList_Check(plans) || !PyList_Check(cursors) ||
        !PyList_Check(planners) || !PyList_Check(idle) || !PyList_Check(others)) {
        PyErr_SetString(PyExc_TypeError, "take_all takes lists");
        return NULL;
    }
    if (PyList_GET_SIZE(visit) != PyList_GET_SIZE(from)) {
        PyErr_SetString(PyExc_ValueError, "take_all visits as many planners as cursors");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(visit) && i < PyList_GET_SIZE(from); i++) {
        PyObject *cur = PyList_GET_ITEM(visit, i), *planner = PyList_GET_ITEM(from, i);
        Py_INCREF(cur); /* the lists are the caller's: a planner's code could change them */
        Py_INCREF(planner);
        PyObject *plan = take_marker(NULL, planner), *pair = NULL;
        int rc = -1;
        if (plan == Py_False) { /* OTHER: the general path's, which the caller runs */
            if ((pair = PyTuple_Pack(2, cur, planner)) != NULL) rc = PyList_Append(others, pair);
            Py_XDECREF(pair);
            Py_DECREF(plan);
        } else if (plan != NULL) {
            rc = plan == Py_None ? PyList_Append(idle, cur) : PyList_Append(plans, plan);
            if (rc == 0 && plan != Py_None &&
                (PyList_Append(cursors, cur) < 0 || PyList_Append(planners, planner) < 0))
                rc = -1;
            Py_DECREF(plan);
        }
        Py_DECREF(cur);
        Py_DECREF(planner);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* One plan's trim with LMDB cursor `c` (lane._trim_all's loop body): its keys deleted
 * where it names them, else trim_records' scan; the records deleted, or -1 with an
 * exception. */
static long long trim_plan(PyObject *plan, PyObject *c, PyObject *cid) {
    PyObject *keys = get(plan, P_TRIM_KEYS);
    long long trimmed = 0;
    if (keys == NULL) return -1;
    if (keys == Py_None) {
        PyObject *below = get(plan, P_GC_BELOW), *live = below == NULL ? NULL : get(plan, P_GC_LIVE), *n = NULL;
        if (live != NULL) {
            PyObject *call[4] = {c, cid, below, live};
            n = PyObject_Vectorcall(trim_records_fn, call, 4, NULL);
        }
        trimmed = n == NULL ? -1 : PyLong_AsLongLong(n);
        Py_XDECREF(below);
        Py_XDECREF(live);
        Py_XDECREF(n);
    } else if (!PyTuple_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "a plan's trim keys are a tuple");
        trimmed = -1;
    } else {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
            PyObject *call[2] = {c, PyTuple_GET_ITEM(keys, i)};
            PyObject *found = PyObject_VectorcallMethod(name_str[M_SET_KEY], call, 2, NULL);
            int there = found == NULL ? -1 : PyObject_IsTrue(found);
            Py_XDECREF(found);
            PyObject *gone = there > 0 ? PyObject_VectorcallMethod(name_str[M_DELETE], call, 1, NULL) : NULL;
            if (there < 0 || (there > 0 && gone == NULL)) {
                trimmed = -1;
                break;
            }
            Py_XDECREF(gone);
            trimmed += there;
        }
    }
    Py_DECREF(keys);
    return trimmed;
}

/* trim_all(trims, untrimmed, c, failed) -> int: lane._trim_all (the garbage of every plan
 * in `trims` but those of the cursor ids in `untrimmed`, deleted with LMDB cursor `c`; a plan
 * whose trim raised an LMDB error is appended to `failed`, and the error goes on) */
PyObject *trim_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("trim_all", "trim_all(trims, untrimmed, c, failed)", nargs, 4) < 0) return NULL;
    PyObject *trims = args[0], *untrimmed = args[1], *c = args[2], *failed = args[3];
    long long trimmed = 0;
    if (!PyList_Check(trims) || !PyList_Check(failed)) {
        PyErr_SetString(PyExc_TypeError, "trim_all's trims and failed are lists");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(trims); i++) {
        PyObject *plan = Py_NewRef(PyList_GET_ITEM(trims, i)), *cid = get(plan, P_CURSOR_ID);
        int skip = cid == NULL ? -1 : PySequence_Contains(untrimmed, cid);
        long long n = skip ? 0 : trim_plan(plan, c, cid);
        Py_XDECREF(cid);
        if (skip < 0 || n < 0) {
            if (n < 0 && PyErr_Occurred() && PyErr_ExceptionMatches(lmdb_error)) {
                PyObject *type, *value, *tb; /* the plan is named; the LMDB error goes on */
                PyErr_Fetch(&type, &value, &tb);
                if (PyList_Append(failed, plan) < 0) {
                    Py_XDECREF(type);
                    Py_XDECREF(value);
                    Py_XDECREF(tb);
                } else {
                    PyErr_Restore(type, value, tb);
                }
            }
            Py_DECREF(plan);
            return NULL;
        }
        Py_DECREF(plan);
        trimmed += n;
    }
    return PyLong_FromLongLong(trimmed);
}

/* commit_all(plans, planners) -> list[int]: lane._commit_all (commit_marker for each marker
 * plan; the indexes of the plans the caller's cursors still act on: any other plan, which
 * its cursor adopts, and a full marker plan, which may leave its cursor in the small form) */
PyObject *commit_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("commit_all", "commit_all(plans, planners)", nargs, 2) < 0) return NULL;
    PyObject *plans = args[0], *planners = args[1];
    if (!PyList_Check(plans) || !PyList_Check(planners) || PyList_GET_SIZE(planners) != PyList_GET_SIZE(plans)) {
        PyErr_SetString(PyExc_TypeError, "commit_all takes two lists of one length");
        return NULL;
    }
    PyObject *rest = PyList_New(0);
    if (rest == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plans); i++) {
        PyObject *plan = PyList_GET_ITEM(plans, i), *r;
        int t = 1;
        if (Py_TYPE(plan) == (PyTypeObject *)plan_type) {
            PyObject *pair[2] = {PyList_GET_ITEM(planners, i), plan};
            if ((r = commit_marker(NULL, pair, 2)) == NULL) goto fail;
            Py_DECREF(r);
            if ((t = truth(plan, P_FULL)) < 0) goto fail; /* a full one may leave the cursor in the form */
        }
        if (t) {
            PyObject *n = PyLong_FromSsize_t(i);
            if (n == NULL || PyList_Append(rest, n) < 0) {
                Py_XDECREF(n);
                goto fail;
            }
            Py_DECREF(n);
        }
    }
    return rest;
fail:
    Py_DECREF(rest);
    return NULL;
}

/* One plan's part of the figures: its puts appended, itself to the trims if it trims.
 * 0, or -1 with an exception. */
static int gather(PyObject *plan, PyObject *puts, PyObject *trims, long long *full, long long *nbytes) {
    PyObject *p = get(plan, P_PUTS);
    if (p == NULL) return -1;
    PyObject *seq = PySequence_Fast(p, "a plan's puts are a sequence");
    Py_DECREF(p);
    if (seq == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && rc == 0; i++)
        rc = PyList_Append(puts, PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (rc < 0) return -1;
    long long below = integer(plan, P_GC_BELOW), n;
    if (FAILED(below)) return -1;
    if (below > 0 && PyList_Append(trims, plan) < 0) return -1;
    int t = truth(plan, P_FULL);
    if (t < 0 || FAILED(n = integer(plan, P_NBYTES))) return -1;
    *full += t;
    *nbytes += n;
    return 0;
}

/* encode_all(plans, start, puts, trims) -> (full markers, bytes): lane._encode_all (the
 * puts of every plan from `start` on, encoded already, gathered in order; the plans that
 * trim; the figures they add) */
PyObject *encode_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (ready("encode_all", "encode_all(plans, start, puts, trims)", nargs, 4) < 0) return NULL;
    PyObject *plans = args[0], *puts = args[2], *trims = args[3];
    long long full = 0, nbytes = 0, start = PyLong_AsLongLong(args[1]);
    if (FAILED(start)) return NULL;
    if (!PyList_Check(plans) || !PyList_Check(puts) || !PyList_Check(trims)) {
        PyErr_SetString(PyExc_TypeError, "encode_all's plans, puts and trims are lists");
        return NULL;
    }
    if (start < 0) {
        PyErr_Format(PyExc_ValueError, "encode_all starts at plan %lld, not a count", start);
        return NULL;
    }
    for (Py_ssize_t i = (Py_ssize_t)start; i < PyList_GET_SIZE(plans); i++) {
        PyObject *plan = Py_NewRef(PyList_GET_ITEM(plans, i));
        int rc = gather(plan, puts, trims, &full, &nbytes);
        Py_DECREF(plan);
        if (rc < 0) return NULL;
    }
    return Py_BuildValue("LL", full, nbytes);
}
