/* ackstore._native.ack_method: Cursor.ack compiled, for a cursor in the small form.
 *
 * Cursor.ack is a broker's most frequent call. For a cursor in the small form (nearly every
 * cursor: ackstore/cursor/small.py) the ack is the form's own (small_ack, _small.c, on its
 * own type); what lies between the caller and it is the cursor's checks and the store's
 * lock. This file does those from the caller's call with no Python frame: it reads the
 * public cursor's core, the core's store and topic at the indexes the build wrote into
 * _fields_layout.h from the field types ackstore/fields.py declares (FacadeFields,
 * CoreFields, HostFields, TopicFields), takes the store's lock (a StoreLock, _lock.c) and
 * hands the positions to the form. Anything else it declines having changed nothing, and
 * CursorCore.ack (Python) decides: a cursor outside the form, a closed or read-only store,
 * a deleted cursor, an argument that is not a Position or a list or tuple of them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

#include "_fields_layout.h"
#include "_native.h"

#define FIELD(o, i) (((PyObject **)((char *)(o) + sizeof(PyObject)))[i])

static PyTypeObject *position_type; /* ackstore.position.Position, given by ack_setup */
/* the field types (ack_setup looks them up) and the class each one's last object was of */
static PyTypeObject *core_type, *host_type, *topic_type, *facade_type;
static PyTypeObject *core_seen, *host_seen, *topic_seen, *facade_seen;

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

/* 1 when `o` is of the field type `tp` or derives from it; `seen`: the class the last such
 * object was of (most are of the one class that derives from it: no walk of its bases) */
static int of(PyObject *o, PyTypeObject *tp, PyTypeObject **seen) {
    PyTypeObject *t = Py_TYPE(o);
    if (t == *seen) return 1;
    if (tp == NULL || !PyType_IsSubtype(t, tp)) return 0;
    Py_XSETREF(*seen, (PyTypeObject *)Py_NewRef(t));
    return 1;
}

/* the field types, looked up once (ack_setup) */
static int typed(void) {
    if (core_type != NULL) return 0;
    core_type = fields_type_named("CoreFields");
    host_type = fields_type_named("HostFields");
    topic_type = fields_type_named("TopicFields");
    facade_type = fields_type_named("FacadeFields");
    if (core_type && host_type && topic_type && facade_type) return 0;
    PyErr_SetString(PyExc_RuntimeError, "ackstore.fields made no field types for the compiled ack");
    core_type = NULL;
    return -1;
}

/* call_ready for a function of this part: set up once ack_setup ran */
static int ready(const char *usage, Py_ssize_t nargs, Py_ssize_t want) {
    return call_ready(usage, usage, nargs, want, position_type != NULL, "ack_setup");
}

/* ack_cursor(core, positions) -> 0, 1, 3 or 4: CursorCore.ack of one Position, or of a list
 * or tuple of positions, whole, where its checks pass without a word (the store open and
 * writable, the cursor not deleted; checked under the store's lock) and the cursor is in
 * its small form: that form's own ack (small_ack, which lists the form for the next flush
 * when the ack changed it first since the last); the lock released. 0: declined before
 * anything changed (the core's own ack decides); 1: done; 3: done, over the form's cap (the
 * parts take it); 4: done, M moved on into the next ledger (the core bounds the form again).
 * cursor_ack: the same, -1 with an exception. */
static int cursor_ack(PyObject *core, PyObject *pos) {
    int one = Py_TYPE(pos) == position_type, many = PyList_CheckExact(pos) || PyTuple_CheckExact(pos);
    if (!(one || many) || !of(core, core_type, &core_seen)) return 0;
    PyObject *lock = FIELD(core, F_CoreFields__lock), *host = FIELD(core, F_CoreFields__store);
    /* (the store's own lock, ackstore/lock.py: taken with no call through Python) */
    if (lock == NULL || !store_lock_check(lock) || host == NULL || !of(host, host_type, &host_seen)) return 0;
    if (store_lock_enter(lock) < 0) return -1;
    /* under the lock: a flush may have put the cursor in the small form, a close or a
     * delete may have come, since the caller looked */
    PyObject *topic = FIELD(core, F_CoreFields_topic);
    long long version;
    int r = 0;
    PyObject *small = FIELD(core, F_CoreFields_small);
    if (FIELD(host, F_HostFields_closed) == Py_False && FIELD(host, F_HostFields_readonly) == Py_False &&
        FIELD(core, F_CoreFields__deleted) == Py_False && small != NULL && topic != NULL &&
        of(topic, topic_type, &topic_seen) && int_field(topic, F_TopicFields_version, &version)) {
        PyObject *smalls = FIELD(host, F_HostFields_small_list);
        if (small != Py_None && smalls != NULL) /* the form's own ack (_small.c); the form listed when it changed */
            r = small_ack(small, pos, one, version, smalls, core);
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
 * anything else to spec, and after an ack of cursor_ack's codes 3 and 4 calls `follow`
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
        if (r >= 3) { /* (3, 4: the follow-up is the core's) */
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

/* ack_setup(Position) */
static PyObject *ack_setup(PyObject *self, PyObject *arg) {
    if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject *)arg, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "ack_setup(Position: a tuple type)");
        return NULL;
    }
    if (typed() < 0) return NULL;
    Py_XSETREF(position_type, (PyTypeObject *)Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"ack_cursor", (PyCFunction)(void (*)(void))ack_cursor, METH_FASTCALL,
     "ack_cursor(core, positions) -> 0 (declined: the core's ack decides), 1 (done in the small form), 3 "
     "(done in the small form; over its cap) or 4 (done in the small form; M moved into another ledger)"},
    {"ack_setup", ack_setup, METH_O, "ack_setup(Position)"},
    {"ack_method", (PyCFunction)(void (*)(void))ack_method, METH_FASTCALL,
     "ack_method(spec, follow) -> Cursor.ack compiled: one Position or a list acked with no Python frame, "
     "any other call handed to spec (the Python method), a done code of 3 or 4 to follow (CursorCore.ack)"},
    {NULL, NULL, 0, NULL},
};

int ack_init(PyObject *m) {
    if (PyType_Ready(&AckMethodType) < 0) return -1;
    return PyModule_AddFunctions(m, methods);
}
