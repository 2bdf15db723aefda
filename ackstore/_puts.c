/* ackstore._native.Puts: the (key, value) pairs a flush puts, held in one buffer.
 *
 * A flush of thousands of small cursors puts one small value per cursor. Made as a list of
 * (bytes, bytes) tuples, each pair is three objects allocated for the flush, read once by
 * LMDB's putmulti from wherever the allocator put them, and freed after it: in a process
 * that has run a while, most of a put's time went there (10,000 slot values in a warm
 * process: 0.4-0.55 us a put from such a list, against 0.14-0.23 us from one buffer).
 * A Puts holds every pair's bytes in one growable buffer, one after another, and an index
 * of where each pair starts; its iterator hands LMDB each pair as a 2-tuple of two windows
 * on that buffer (a type of this file that exports a read-only buffer), the same tuple and
 * windows again for the next pair whenever nothing else holds them (putmulti takes a
 * pair's buffers, puts it and lets go of the pair before it asks for the next one), new
 * ones otherwise: a pair anyone still holds never changes. The buffer does not move while
 * a window's buffer is exported (add refuses then).
 *
 * Python: Puts() (empty), add(key, value), len(), iter() (again from the first pair each
 * time, so a write replayed after the map grew puts them again), nbytes (keys and values
 * together). C: puts_new and puts_add (_native.h), which the small forms' flush
 * (_small.c) fills. The pure-Python twin of a Puts is a list of (bytes, bytes) tuples.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_native.h"

typedef struct {
    PyObject_HEAD
    Out out;          /* every pair's key, then its value, pair after pair */
    Py_ssize_t *at;   /* 3 a pair: where its key starts, its key's length, its value's length */
    Py_ssize_t n, acap;
    Py_ssize_t exports; /* buffers of windows on `out` not released yet */
} Puts;

typedef struct {
    PyObject_HEAD
    Puts *owner;
    Py_ssize_t start, len;
    Py_ssize_t exports;
} Window;

typedef struct {
    PyObject_HEAD
    Puts *owner;
    Py_ssize_t i;
    PyObject *pair; /* the tuple last handed out, (k, v); NULL before the first */
    Window *k, *v;
} PutsIter;

static PyTypeObject PutsType, WindowType, PutsIterType;

static int window_getbuffer(Window *w, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)w, w->owner->out.b + w->start, w->len, 1, flags) < 0) return -1;
    w->exports++;
    w->owner->exports++;
    return 0;
}

static void window_releasebuffer(Window *w, Py_buffer *view) {
    (void)view;
    w->exports--;
    w->owner->exports--;
}

static PyBufferProcs window_as_buffer = {(getbufferproc)window_getbuffer, (releasebufferproc)window_releasebuffer};

static void window_dealloc(Window *w) {
    Py_XDECREF(w->owner);
    PyObject_Free(w);
}

static PyObject *window_repr(Window *w) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)w->owner->out.b + w->start, w->len);
    if (b == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("<Puts window %R>", b);
    Py_DECREF(b);
    return r;
}

static PyTypeObject WindowType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.PutsWindow",
    .tp_doc = "A key or a value of a Puts: a read-only buffer on its bytes (bytes(w) copies them).",
    .tp_basicsize = sizeof(Window),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)window_dealloc,
    .tp_repr = (reprfunc)window_repr,
    .tp_as_buffer = &window_as_buffer,
};

static Window *window_new(Puts *owner) {
    Window *w = PyObject_New(Window, &WindowType);
    if (w == NULL) return NULL;
    w->owner = (Puts *)Py_NewRef(owner);
    w->start = w->len = w->exports = 0;
    return w;
}

/* the iterator's next pair: its tuple and windows again when only it holds them */
static PyObject *putsiter_next(PutsIter *it) {
    Puts *p = it->owner;
    if (it->i >= p->n) return NULL;
    const Py_ssize_t *a = p->at + 3 * it->i++;
    int again = it->pair != NULL && Py_REFCNT(it->pair) == 1 && Py_REFCNT(it->k) == 1 && Py_REFCNT(it->v) == 1 &&
                it->k->exports == 0 && it->v->exports == 0;
    if (!again) {
        Py_CLEAR(it->pair);
        it->k = window_new(p);
        it->v = it->k == NULL ? NULL : window_new(p);
        if (it->v != NULL) it->pair = PyTuple_Pack(2, (PyObject *)it->k, (PyObject *)it->v);
        Py_XDECREF(it->k); /* the tuple holds them */
        Py_XDECREF(it->v);
        if (it->pair == NULL) return NULL;
    }
    it->k->start = a[0], it->k->len = a[1];
    it->v->start = a[0] + a[1], it->v->len = a[2];
    return Py_NewRef(it->pair);
}

static void putsiter_dealloc(PutsIter *it) {
    Py_XDECREF(it->pair);
    Py_XDECREF(it->owner);
    PyObject_Free(it);
}

static PyTypeObject PutsIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.PutsIterator",
    .tp_basicsize = sizeof(PutsIter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)putsiter_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)putsiter_next,
};

PyObject *puts_new(void) {
    Puts *p = PyObject_New(Puts, &PutsType);
    if (p == NULL) return NULL;
    p->out.b = NULL, p->out.len = p->out.cap = 0;
    p->at = NULL, p->n = p->acap = p->exports = 0;
    return (PyObject *)p;
}

int puts_add(PyObject *self, const unsigned char *key, Py_ssize_t klen, const unsigned char *value, Py_ssize_t vlen) {
    Puts *p = (Puts *)self;
    if (p->exports) {
        PyErr_SetString(PyExc_BufferError, "a Puts takes no pair while a key or value of it is being read");
        return -1;
    }
    if (p->n == p->acap) {
        Py_ssize_t cap = p->acap ? 2 * p->acap : 64;
        Py_ssize_t *at = (Py_ssize_t *)PyMem_Realloc(p->at, sizeof(Py_ssize_t) * 3 * (size_t)cap);
        if (at == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->at = at, p->acap = cap;
    }
    Py_ssize_t start = p->out.len;
    unsigned char *room = out_room(&p->out, klen + vlen);
    if (room == NULL) return -1;
    memcpy(room, key, (size_t)klen);
    memcpy(room + klen, value, (size_t)vlen);
    Py_ssize_t *a = p->at + 3 * p->n++;
    a[0] = start, a[1] = klen, a[2] = vlen;
    return 0;
}

static PyObject *Puts_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)type;
    if (PyTuple_GET_SIZE(args) || (kw != NULL && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "Puts() takes no arguments");
        return NULL;
    }
    return puts_new();
}

static void Puts_dealloc(Puts *p) {
    PyMem_Free(p->out.b);
    PyMem_Free(p->at);
    PyObject_Free(p);
}

static PyObject *Puts_add(Puts *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "Puts.add(key, value)");
        return NULL;
    }
    Py_buffer k, v;
    if (PyObject_GetBuffer(args[0], &k, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &v, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&k);
        return NULL;
    }
    int r = puts_add((PyObject *)p, k.buf, k.len, v.buf, v.len);
    PyBuffer_Release(&k);
    PyBuffer_Release(&v);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t Puts_len(Puts *p) { return p->n; }

static PyObject *Puts_iter(Puts *p) {
    PutsIter *it = PyObject_New(PutsIter, &PutsIterType);
    if (it == NULL) return NULL;
    it->owner = (Puts *)Py_NewRef(p);
    it->i = 0;
    it->pair = NULL;
    it->k = it->v = NULL;
    return (PyObject *)it;
}

static PyObject *Puts_nbytes(Puts *p, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(p->out.len);
}

static PyMethodDef Puts_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Puts_add, METH_FASTCALL, "add(key, value): one more pair (bytes-like)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Puts_getset[] = {
    {"nbytes", (getter)Puts_nbytes, NULL, "The bytes of every key and value together.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Puts_as_sequence = {.sq_length = (lenfunc)Puts_len};

static PyTypeObject PutsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.Puts",
    .tp_doc = "Puts(): the (key, value) pairs a flush puts, in one buffer; iterated as 2-tuples of "
              "read-only buffers (what LMDB's putmulti takes), from the first pair each time.",
    .tp_basicsize = sizeof(Puts),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Puts_new,
    .tp_dealloc = (destructor)Puts_dealloc,
    .tp_iter = (getiterfunc)Puts_iter,
    .tp_as_sequence = &Puts_as_sequence,
    .tp_methods = Puts_methods,
    .tp_getset = Puts_getset,
};

int puts_init(PyObject *m) {
    if (PyType_Ready(&PutsType) < 0 || PyType_Ready(&WindowType) < 0 || PyType_Ready(&PutsIterType) < 0) return -1;
    return PyModule_AddObjectRef(m, "Puts", (PyObject *)&PutsType);
}
