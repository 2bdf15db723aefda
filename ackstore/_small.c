/* ackstore._native.SmallState, flush_small and undo_small: the compiled twins of the class
 * and functions of the same names in ackstore/cursor/small.py (which says what the small
 * form is, and when a cursor takes it).
 *
 * A SmallState is one object of its own: the cursor's mark-delete position, its log's next
 * sequence and state slots, and the runs of acks above M (all in M's ledger) as pairs of
 * u32 (first, last), ascending, a gap between two, in the object up to OWN_RUNS runs and in
 * a PyMem buffer beyond. An ack writes here; a flush encodes each changed one's state slot
 * value with the state layout's own writers (_native.h) and adopts it in the same visit. Its
 * fields are read from Python through the members below, never through another class.
 */
#include "_native.h"
#include <string.h>
#include <structmember.h>

#define OWN_RUNS 4
#define UNDO 0x80 /* in `undo`: the last flush took this one (the low bits: its slots before) */

typedef struct {
    PyObject_HEAD
    long long md_l, md_e;
    uint32_t *runs; /* 2 * n: first, last */
    uint32_t n, room, cap;
    uint8_t dirty, slot, slots, undo, ended;
    unsigned long long cursor_id, next_seq;
    unsigned long long flushes, flush_bytes;
    uint32_t persisted, undo_persisted, last_bytes;
    uint32_t own[2 * OWN_RUNS];
} SmallState;

static PyTypeObject SmallStateType;

/* room for `need` runs; -1 with MemoryError */
static int room_for(SmallState *s, uint32_t need) {
    if (need <= s->room) return 0;
    uint32_t room = s->room * 2 > need ? s->room * 2 : need;
    uint32_t *r = PyMem_Malloc(sizeof(uint32_t) * 2 * room);
    if (r == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(r, s->runs, sizeof(uint32_t) * 2 * s->n);
    if (s->runs != s->own) PyMem_Free(s->runs);
    s->runs = r;
    s->room = room;
    return 0;
}

/* entries f..l (above M) added: merged with the runs they overlap or touch. 1 if anything
 * changed, 0 if they were acked already, -1 with MemoryError. O(runs). */
static int add_run(SmallState *s, uint32_t f, uint32_t l) {
    uint32_t *r = s->runs, n = s->n, i = 0, j;
    while (i < n && (uint64_t)r[2 * i + 1] + 1 < f) i++;
    j = i;
    while (j < n && r[2 * j] <= (uint64_t)l + 1) j++;
    if (i == j) { /* a run of its own, at i */
        if (room_for(s, n + 1) < 0) return -1;
        r = s->runs;
        memmove(r + 2 * i + 2, r + 2 * i, sizeof(uint32_t) * 2 * (n - i));
        r[2 * i] = f;
        r[2 * i + 1] = l;
        s->n = n + 1;
        return 1;
    }
    if (j == i + 1 && r[2 * i] <= f && l <= r[2 * i + 1]) return 0; /* inside one run */
    if (r[2 * i] < f) f = r[2 * i];
    if (r[2 * j - 1] > l) l = r[2 * j - 1];
    r[2 * i] = f;
    r[2 * i + 1] = l;
    memmove(r + 2 * i + 2, r + 2 * j, sizeof(uint32_t) * 2 * (n - j));
    s->n = n - (j - i - 1);
    return 1;
}

/* M moved over the first run when it starts at M + 1 */
static void advance(SmallState *s) {
    if (s->n && s->runs[0] == (unsigned long long)(s->md_e + 1)) {
        s->md_e = s->runs[1];
        memmove(s->runs, s->runs + 2, sizeof(uint32_t) * 2 * (s->n - 1));
        s->n--;
    }
}

/* entries f..l of M's ledger acked: the part above M added, then M advanced. 0 or -1. */
static int ack_run(SmallState *s, long long f, long long l) {
    if (l <= s->md_e) return 0;
    if (f <= s->md_e) f = s->md_e + 1;
    int changed = add_run(s, (uint32_t)f, (uint32_t)l);
    if (changed < 0) return -1;
    if (changed) {
        s->dirty = 1;
        advance(s);
    }
    return 0;
}

static PyObject *fits(SmallState *s) { return PyBool_FromLong(s->n <= s->cap); }

static int entry_of(PyObject *v, const char *what, long long *out) {
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x < 0 || x > 0xFFFFFFFFLL) {
        PyErr_Format(PyExc_ValueError, "%s %lld is not an entry of the layout (0..2**32-1)", what, x);
        return -1;
    }
    *out = x;
    return 0;
}

/* A new SmallState of `type` holding these fields and no run yet, with room for `runs`
 * of them; NULL with an exception set */
static SmallState *small_new(PyTypeObject *type, unsigned long long cid, long long md_l, long long md_e,
                             unsigned long long seq, int slot, int slots, uint32_t cap, uint32_t runs) {
    SmallState *s = (SmallState *)type->tp_alloc(type, 0);
    if (s == NULL) return NULL;
    s->runs = s->own;
    s->room = OWN_RUNS;
    s->cursor_id = cid;
    s->md_l = md_l;
    s->md_e = md_e;
    s->next_seq = seq;
    s->slot = (uint8_t)slot;
    s->slots = (uint8_t)slots;
    s->cap = cap;
    if (room_for(s, runs) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* SmallState(cursor_id, md_l, md_e, next_seq, slot, slots, runs, cap) */
static PyObject *SmallState_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    unsigned long long cid, seq;
    long long md_l, md_e;
    int slot, slots;
    unsigned int cap;
    PyObject *runs;
    static char *names[] = {"cursor_id", "md_l", "md_e", "next_seq", "slot", "slots", "runs", "cap", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KLLKiiOI", names, &cid, &md_l, &md_e, &seq, &slot, &slots, &runs, &cap))
        return NULL;
    if (md_l < 0 || md_e < -1 || md_e >= 0xFFFFFFFFLL || slot < 0 || slot > 1 || slots < 0 || slots > 3) {
        PyErr_SetString(PyExc_ValueError, "a small state's position, slot or slots are outside the layout");
        return NULL;
    }
    PyObject *seq_obj = PySequence_Fast(runs, "runs are a sequence of (first, last)");
    if (seq_obj == NULL) return NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq_obj);
    SmallState *s = small_new(type, cid, md_l, md_e, seq, slot, slots, cap, (uint32_t)m);
    if (s == NULL) {
        Py_DECREF(seq_obj);
        return NULL;
    }
    long long at = md_e + 2; /* a run starts above M + 1, each a gap after the one before */
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq_obj, i);
        long long f, l;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
            PyErr_SetString(PyExc_TypeError, "a run is a (first, last) tuple");
            goto fail;
        }
        if (entry_of(PyTuple_GET_ITEM(t, 0), "first", &f) < 0 || entry_of(PyTuple_GET_ITEM(t, 1), "last", &l) < 0)
            goto fail;
        if (f < at || l < f) {
            PyErr_Format(PyExc_ValueError, "run (%lld, %lld) is not above M + 1 and the run before, with a gap", f, l);
            goto fail;
        }
        s->runs[2 * i] = (uint32_t)f;
        s->runs[2 * i + 1] = (uint32_t)l;
        at = l + 2;
    }
    s->n = s->persisted = (uint32_t)m;
    Py_DECREF(seq_obj);
    return (PyObject *)s;
fail:
    Py_DECREF(seq_obj);
    Py_DECREF(s);
    return NULL;
}

static void SmallState_dealloc(SmallState *s) {
    if (s->runs != s->own) PyMem_Free(s->runs);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* ack_range(first, last) -> bool: entries first..last of M's ledger acked; whether the runs
 * still fit the cap */
static PyObject *SmallState_ack_range(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "ack_range(first, last)");
        return NULL;
    }
    long long f, l;
    if (entry_of(args[0], "first", &f) < 0 || entry_of(args[1], "last", &l) < 0) return NULL;
    if (l < f) {
        PyErr_Format(PyExc_ValueError, "run (%lld, %lld) ends before it starts", f, l);
        return NULL;
    }
    if (ack_run(s, f, l) < 0) return NULL;
    return fits(s);
}

/* ack_bitmap(bitmap) -> bool: a BitMap's entries of M's ledger acked; whether they fit */
static PyObject *SmallState_ack_bitmap(SmallState *s, PyObject *bitmap) {
    uint32_t *fs, *ls;
    Py_ssize_t m = bitmap_runs(bitmap, &fs, &ls);
    if (m < 0) return NULL;
    int rc = 0;
    for (Py_ssize_t k = 0; k < m && rc == 0; k++) rc = ack_run(s, fs[k], ls[k]);
    PyMem_Free(fs);
    PyMem_Free(ls);
    if (rc < 0) return NULL;
    return fits(s);
}

/* acked(entry) -> bool: whether entry of M's ledger is acked (at or below M, or in a run) */
static PyObject *SmallState_acked(SmallState *s, PyObject *arg) {
    long long e = PyLong_AsLongLong(arg);
    if (e == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    if (e <= s->md_e) Py_RETURN_TRUE;
    uint32_t lo = 0, hi = s->n; /* the first run ending at or after e */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->runs[2 * mid + 1] < e) lo = mid + 1;
        else hi = mid;
    }
    return PyBool_FromLong(lo < s->n && s->runs[2 * lo] <= e);
}

/* end(): the cursor left the small form; no flush takes this one again */
static PyObject *SmallState_end(SmallState *s, PyObject *unused) {
    s->ended = 1;
    s->dirty = 0;
    Py_RETURN_NONE;
}

/* runs() -> [(first, last), ...] */
static PyObject *SmallState_runs(SmallState *s, PyObject *unused) {
    PyObject *out = PyList_New(s->n);
    if (out == NULL) return NULL;
    for (uint32_t i = 0; i < s->n; i++) {
        PyObject *t = Py_BuildValue("(II)", s->runs[2 * i], s->runs[2 * i + 1]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

static PyMethodDef SmallState_methods[] = {
    {"ack_range", (PyCFunction)(void (*)(void))SmallState_ack_range, METH_FASTCALL,
     "Entries first..last of M's ledger acked; whether the runs still fit the cap."},
    {"ack_bitmap", (PyCFunction)SmallState_ack_bitmap, METH_O,
     "A BitMap's entries of M's ledger acked; whether the runs still fit the cap."},
    {"runs", (PyCFunction)SmallState_runs, METH_NOARGS, "The runs above M, [(first, last), ...]."},
    {"acked", (PyCFunction)SmallState_acked, METH_O, "Whether an entry of M's ledger is acked."},
    {"end", (PyCFunction)SmallState_end, METH_NOARGS, "The cursor left the small form: no flush takes this one again."},
    {NULL, NULL, 0, NULL},
};

#define MEMBER(name, type, doc) {#name, type, offsetof(SmallState, name), READONLY, doc}
static PyMemberDef SmallState_members[] = {
    MEMBER(cursor_id, T_ULONGLONG, "the cursor's id"),
    MEMBER(md_l, T_LONGLONG, "the mark-delete position's ledger"),
    MEMBER(md_e, T_LONGLONG, "the mark-delete position's entry"),
    MEMBER(next_seq, T_ULONGLONG, "the log's next sequence"),
    MEMBER(slot, T_UBYTE, "the state slot the newest state is in"),
    MEMBER(slots, T_UBYTE, "which state slots hold a value (bits 0 and 1)"),
    MEMBER(dirty, T_UBYTE, "1 when it changed since its last flush"),
    MEMBER(ended, T_UBYTE, "1 once the cursor left the small form"),
    MEMBER(n, T_UINT, "runs held"),
    MEMBER(cap, T_UINT, "the most runs the small form holds"),
    MEMBER(persisted, T_UINT, "runs the newest flushed state holds"),
    MEMBER(flushes, T_ULONGLONG, "flushes in the small form"),
    MEMBER(flush_bytes, T_ULONGLONG, "bytes they wrote (keys and values)"),
    MEMBER(last_bytes, T_UINT, "bytes the last one wrote"),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SmallStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.SmallState",
    .tp_doc = "A small cursor's whole state (ackstore/cursor/small.py).",
    .tp_basicsize = sizeof(SmallState),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = SmallState_new,
    .tp_dealloc = (destructor)SmallState_dealloc,
    .tp_methods = SmallState_methods,
    .tp_members = SmallState_members,
};

/* s's next state, as the value of state slot `slot` with `room` zero bytes of room (its
 * key into `key`) */
static PyObject *slot_value(SmallState *s, int slot, unsigned char *key, uint32_t version, Py_ssize_t room) {
    Py_ssize_t head = slot_head_len(s->next_seq, room);
    Out o = {NULL, 0, 0};
    PyObject *value = NULL;
    if (out_room(&o, head + 7) == NULL) goto done;
    if (put_state_head(&o, 0, s->cursor_id, s->md_l, s->md_e, s->n ? 1 : 0) < 0) goto done;
    if (s->n && (put_varint(&o, 0) < 0 || put_state_runs(&o, s->md_l, s->runs, s->runs + 1, 2, s->n, s->md_e + 1) < 0))
        goto done;
    if (seal_envelope_at(&o, head, RECORD_MARKER, version) < 0) goto done;
    put_slot_head(key, o.b, s->cursor_id, slot, s->next_seq, room);
    value = PyBytes_FromStringAndSize((const char *)o.b, o.len);
done:
    PyMem_Free(o.b);
    return value;
}

/* flush_small(smalls, version, first_room) -> ([(key, value)], bytes) */
static PyObject *flush_small(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "flush_small(smalls: list, version, first_room)");
        return NULL;
    }
    long version = PyLong_AsLong(args[1]);
    Py_ssize_t first_room = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (version < 0 || version > 0xFF || first_room < 0 || first_room > 64) {
        PyErr_Format(PyExc_ValueError, "flush_small: format %ld or room %zd is outside the layout (0..255, 0..64)",
                     version, first_room);
        return NULL;
    }
    PyObject *list = args[0], *puts = PyList_New(0);
    if (puts == NULL) return NULL;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        SmallState *s = (SmallState *)PyList_GET_ITEM(list, i);
        if (Py_TYPE(s) != &SmallStateType) {
            PyErr_Format(PyExc_TypeError, "flush_small flushes SmallStates, not %R", (PyObject *)s);
            goto fail;
        }
        s->undo = 0;
        if (!s->dirty || s->ended) continue;
        Py_ssize_t room;
        int slot = next_slot(s->slot, s->slots, first_room, &room);
        unsigned char key[10];
        PyObject *value = slot_value(s, slot, key, (uint32_t)version, room), *k = NULL, *pair = NULL;
        if (value != NULL && (k = PyBytes_FromStringAndSize((const char *)key, 10)) != NULL)
            pair = PyTuple_Pack(2, k, value);
        Py_XDECREF(k);
        Py_XDECREF(value);
        if (pair == NULL || PyList_Append(puts, pair) < 0) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
        uint32_t nbytes = (uint32_t)(10 + PyBytes_GET_SIZE(value));
        /* adopted now (undo_small gives it back if the write fails) */
        s->undo = UNDO | s->slots;
        s->undo_persisted = s->persisted;
        s->next_seq++;
        s->slot = (uint8_t)slot;
        s->slots |= (uint8_t)(1 << slot);
        s->dirty = 0;
        s->persisted = s->n;
        s->flushes++;
        s->flush_bytes += nbytes;
        s->last_bytes = nbytes;
        total += nbytes;
    }
    return Py_BuildValue("(Nn)", puts, total);
fail:
    Py_DECREF(puts);
    return NULL;
}

/* undo_small(smalls): each one the last flush_small took, as it was before (changed again) */
static PyObject *undo_small(PyObject *self, PyObject *list) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "undo_small(smalls: list)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        SmallState *s = (SmallState *)PyList_GET_ITEM(list, i);
        if (Py_TYPE(s) != &SmallStateType || !(s->undo & UNDO) || s->ended) continue;
        s->next_seq--;
        s->slot = (uint8_t)(1 - s->slot);
        s->slots = s->undo & 3;
        s->persisted = s->undo_persisted;
        s->flushes--;
        s->flush_bytes -= s->last_bytes;
        s->dirty = 1;
        s->undo = 0;
    }
    Py_RETURN_NONE;
}

/* small_of_slots(cursor_id, value0, value1, max_version, cap) -> SmallState | None: the small
 * form of a cursor whose log is only its state slots, read from their values (None: the slot
 * holds none) with the state layout's readers (_native.h); None when a slot's head is
 * damaged (recovery says what it may have held), when the newest state is not an intact
 * state marker of this cursor, or when it is outside the form: properties, partial batches
 * or delivery counts, a ledger other than M's, no run, more than `cap` runs, or a run at
 * M + 1. cursor/small.py's _py_small_of_slots, the same rule. O(the newest value). */
static PyObject *small_of_slots(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "small_of_slots(cursor_id, value0, value1, max_version, cap)");
        return NULL;
    }
    unsigned long long cid = PyLong_AsUnsignedLongLong(args[0]);
    long long max_version = PyLong_AsLongLong(args[3]);
    unsigned long cap = PyLong_AsUnsignedLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    const unsigned char *newest = NULL;
    Py_ssize_t newest_len = 0, start = 0;
    unsigned long long seq = 0;
    int slot = -1, held = 0;
    for (int k = 0; k < 2; k++) {
        PyObject *v = args[1 + k];
        if (v == Py_None) continue;
        if (!PyBytes_Check(v)) {
            PyErr_Format(PyExc_TypeError, "a state slot's value is bytes or None, not %R", v);
            return NULL;
        }
        unsigned char key[10];
        unsigned long long s_k;
        Py_ssize_t at;
        held |= 1 << k;
        put_slot_key(key, cid, k);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(v);
        if (get_slot_head(key, 10, p, PyBytes_GET_SIZE(v), &s_k, &at) < 0) goto declined;
        if (slot < 0 || s_k > seq) {
            slot = k, seq = s_k, newest = p, newest_len = PyBytes_GET_SIZE(v), start = at;
        }
    }
    if (slot < 0) Py_RETURN_NONE;
    const unsigned char *rec = newest + start;
    Py_ssize_t len = newest_len - start;
    if (len < 1 || rec[0] != 0xC1) Py_RETURN_NONE; /* not the fixed envelope: recovery's */
    if (envelope_ok(rec, len, max_version) < 0) goto declined;
    if (rec[1] != RECORD_MARKER || len < 8 || rec[7] != 0xC2) Py_RETURN_NONE; /* another layout */
    Reader r = {rec + 7, len - 7, 0};
    int flags;
    unsigned long long got, md_l, md_e1, n, last, ledger, nruns = 0, at = 0;
    if (get_state_head(&r, &flags, &got, &md_l, &md_e1, &n) < 0) goto declined;
    if (flags || got != cid || n > 1) Py_RETURN_NONE;
    if (n) {
        last = md_l;
        if (get_state_ledger(&r, md_l, md_e1, &last, &ledger, &nruns, &at) < 0) goto declined;
        if (ledger != md_l || !nruns || nruns > cap) Py_RETURN_NONE;
    }
    SmallState *s = small_new(&SmallStateType, cid, (long long)md_l, (long long)md_e1 - 1, seq + 1, slot, held,
                              (uint32_t)cap, (uint32_t)nruns);
    if (s == NULL) return NULL;
    for (unsigned long long j = 0; j < nruns; j++) {
        unsigned long long first, end;
        if (get_state_run(&r, ledger, &at, &first, &end) < 0) goto fail;
        s->runs[2 * j] = (uint32_t)first;
        s->runs[2 * j + 1] = (uint32_t)end;
    }
    if (r.i != r.len || (nruns && s->runs[0] == md_e1)) { /* bytes after the ledgers; a run at M + 1 */
        Py_DECREF(s);
        Py_RETURN_NONE;
    }
    s->n = s->persisted = (uint32_t)nruns;
    return (PyObject *)s;
fail:
    Py_DECREF(s);
declined: /* damage: recovery's to report */
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef small_functions[] = {
    {"small_of_slots", (PyCFunction)(void (*)(void))small_of_slots, METH_FASTCALL,
     "The small form read from a cursor's state slots, or None (cursor/small.py)."},
    {"flush_small", (PyCFunction)(void (*)(void))flush_small, METH_FASTCALL,
     "Every changed SmallState's state slot value, adopted (cursor/small.py)."},
    {"undo_small", (PyCFunction)undo_small, METH_O, "The last flush_small of these given back (cursor/small.py)."},
    {NULL, NULL, 0, NULL},
};

/* called by PyInit__native (_module.c) */
int small_init(PyObject *module) {
    if (PyType_Ready(&SmallStateType) < 0) return -1;
    Py_INCREF(&SmallStateType);
    if (PyModule_AddObject(module, "SmallState", (PyObject *)&SmallStateType) < 0) {
        Py_DECREF(&SmallStateType);
        return -1;
    }
    return PyModule_AddFunctions(module, small_functions);
}
