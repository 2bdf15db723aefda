/* The module ackstore._native, made here; each compiled part adds its own to it: the codecs
 * and the field types (_native.c, with _fields.c's and the chain's bounds, _chain.c's), the small form's
 * type and functions (_small.c), a ledger record's acks (_acks.c), the B-tree walk of an
 * open (_walk.c), the compiled ack of one position (_ack.c), the store's lock (_lock.c), a flush's puts
 * in one buffer (_puts.c).
 * Only this file knows all of them. */
#include "_native.h"

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "ackstore's compiled decoders.", -1, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (native_init(m) < 0 || small_init(m) < 0 || acks_init(m) < 0 || walk_init(m) < 0 || ack_init(m) < 0 ||
        lock_init(m) < 0 || puts_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
