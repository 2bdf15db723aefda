/* ackstore._native.fields_type: the compiled twin of ackstore/fields.py's field types.
 *
 * A flush reads a few fields of every dirty cursor's parts (its pages, ack state, marker
 * chain, planner, ledgers) and of the plans it makes. ackstore/fields.py declares those
 * fields, once, per part; this module makes each declaration a type of its own whose
 * instances hold the fields in their own struct (an array of object pointers, in the
 * declared order), with a member descriptor per field so that Python reads and writes
 * them as attributes. The cursor's classes derive from these types. Compiled code (the
 * ack, _ack.c) reads a field of an object of such a type at the index
 * _fields_layout.h gives it: the build writes that header from the same declarations, and
 * fields_type refuses a type whose fields are not declared there as they are in
 * ackstore/fields.py now (a module built from another fields.py). Anything else compiled
 * code reads through the attribute protocol. Nothing here knows the classes that derive
 * from the types.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#include "_fields_layout.h"

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

#define MAX_TYPES 16

typedef struct {
    PyTypeObject *type;
    PyObject *names; /* the tuple of field names, in struct order */
    Py_ssize_t n;
} Declared;

static Declared declared[MAX_TYPES];
static int ndeclared;

static PyObject **fields_of(PyObject *self) { return (PyObject **)((char *)self + sizeof(PyObject)); }

/* how many fields the field type `tp` is or derives from holds (0: none) */
static Py_ssize_t fields_count(PyTypeObject *tp) {
    for (; tp != NULL; tp = tp->tp_base)
        for (int i = 0; i < ndeclared; i++)
            if (declared[i].type == tp) return declared[i].n;
    return 0;
}

static int fields_traverse(PyObject *self, visitproc visit, void *arg) {
    PyObject **f = fields_of(self);
    for (Py_ssize_t i = 0, n = fields_count(Py_TYPE(self)); i < n; i++) Py_VISIT(f[i]);
    Py_VISIT(Py_TYPE(self)); /* a heap type's instances keep it alive */
    return 0;
}

static int fields_clear(PyObject *self) {
    PyObject **f = fields_of(self);
    for (Py_ssize_t i = 0, n = fields_count(Py_TYPE(self)); i < n; i++) Py_CLEAR(f[i]);
    return 0;
}

static void fields_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fields_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* 1 when the field type `qualified` (its last dotted part) holding `names` is declared so
 * in FIELDS_DECLARED (what this module was built from); else 0 with RuntimeError */
static int built_from(const char *qualified, PyObject *names) {
    const char *dot = strrchr(qualified, '.'), *name = dot != NULL ? dot + 1 : qualified;
    PyObject *joined = NULL, *sep = PyUnicode_FromString(","), *entry = NULL;
    int ok = 0;
    if (sep != NULL && (joined = PyUnicode_Join(sep, names)) != NULL &&
        (entry = PyUnicode_FromFormat("%s:%U", name, joined)) != NULL) {
        static const char all[] = FIELDS_DECLARED;
        const char *want = PyUnicode_AsUTF8(entry), *at = all;
        size_t len = want == NULL ? 0 : strlen(want);
        while (want != NULL && (at = strstr(at, want)) != NULL) {
            if ((at == all || at[-1] == ';') && (at[len] == ';' || at[len] == '\0')) {
                ok = 1;
                break;
            }
            at += len;
        }
        if (!ok && want != NULL)
            PyErr_Format(PyExc_RuntimeError,
                         "ackstore._native was built from another ackstore/fields.py (%s is not declared "
                         "there as it is now): rebuild it (make)",
                         name);
    }
    Py_XDECREF(sep);
    Py_XDECREF(joined);
    Py_XDECREF(entry);
    return ok;
}

/* The field type named `name` (its unqualified name), a borrowed reference; NULL (no
 * exception) when none was made. */
PyTypeObject *fields_type_named(const char *name) {
    for (int i = 0; i < ndeclared; i++) {
        const char *tp = declared[i].type->tp_name, *dot = strrchr(tp, '.');
        if (strcmp(dot != NULL ? dot + 1 : tp, name) == 0) return declared[i].type;
    }
    return NULL;
}

/* fields_type(qualified_name, names, doc) -> a new type holding `names` */
PyObject *fields_type(PyObject *self, PyObject *args) {
    const char *qualified, *doc;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "sO!s", &qualified, &PyTuple_Type, &names, &doc)) return NULL;
    if (ndeclared == MAX_TYPES) {
        PyErr_Format(PyExc_RuntimeError, "fields_type makes at most %d types", MAX_TYPES);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "fields_type's names are strings");
            return NULL;
        }
    if (!built_from(qualified, names)) return NULL;
    /* the names, the members and the type's strings live as long as the process (a type
     * may point into them) */
    PyMemberDef *members = PyMem_Calloc((size_t)n + 1, sizeof(PyMemberDef));
    char *name_copy = PyMem_Malloc(strlen(qualified) + 1), *doc_copy = PyMem_Malloc(strlen(doc) + 1);
    if (members == NULL || name_copy == NULL || doc_copy == NULL) {
        PyMem_Free(members);
        PyMem_Free(name_copy);
        PyMem_Free(doc_copy);
        return PyErr_NoMemory();
    }
    strcpy(name_copy, qualified);
    strcpy(doc_copy, doc);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        const char *utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fields_type's names are strings");
            PyMem_Free(members);
            PyMem_Free(name_copy);
            PyMem_Free(doc_copy);
            return NULL;
        }
        members[i].name = utf8; /* the tuple is kept below, so its strings are */
        members[i].type = Py_T_OBJECT_EX;
        members[i].offset = (Py_ssize_t)(sizeof(PyObject) + (size_t)i * sizeof(PyObject *));
    }
    PyType_Slot slots[] = {
        {Py_tp_members, members}, {Py_tp_traverse, fields_traverse}, {Py_tp_clear, fields_clear},
        {Py_tp_dealloc, fields_dealloc}, {Py_tp_doc, doc_copy}, {0, NULL},
    };
    PyType_Spec spec = {
        name_copy, (int)(sizeof(PyObject) + (size_t)n * sizeof(PyObject *)), 0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, slots,
    };
    PyObject *type = PyType_FromSpec(&spec);
    if (type == NULL) {
        PyMem_Free(members);
        PyMem_Free(name_copy);
        PyMem_Free(doc_copy);
        return NULL;
    }
    declared[ndeclared].type = (PyTypeObject *)Py_NewRef(type);
    declared[ndeclared].names = Py_NewRef(names);
    declared[ndeclared].n = n;
    ndeclared++;
    return type;
}
