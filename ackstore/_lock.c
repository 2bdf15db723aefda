/* ackstore._native.StoreLock: the store's reentrant lock, a type of ackstore's own.
 *
 * A store and its cursors share one lock (ackstore/lock.py), and every cursor call takes
 * it: `with lock:` once or twice for each read, ack and delivery a broker makes. The
 * interpreter's RLock costs several hundred nanoseconds a `with` on some hosts (its
 * __enter__ parses keyword arguments, and its semaphore's try reads the clock), which was
 * most of what an ack in the small form cost. This lock is the same rule, the
 * threading.RLock's: a thread that holds it may take it again and must release it as often;
 * another thread waits, the interpreter lock released while it waits (signal handlers run
 * meanwhile, as with RLock). Its __enter__ and __exit__ take no arguments to parse, and
 * compiled code takes it with store_lock_enter and store_lock_exit (_native.h) without a
 * call through Python at all.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <sched.h>
#include <stddef.h>
#include <structmember.h>
#include <time.h>

#include "_native.h"

/* The lock's state (its owner, how many times it took it, how many threads wait) is read
 * and changed only with the interpreter lock held, which makes each take and give one
 * step to every other thread: an uncontended take is a few loads and stores, with no
 * semaphore and no clock. A thread that finds the lock held waits on `gate`, a lock kept
 * taken (closed), with the interpreter lock released; a holder that gives the lock back
 * while threads wait releases the gate once, which lets one of them look again: it takes
 * the lock if it is free, else waits again (the thread that took it first will release
 * the gate in its turn, as the waiter is still counted). A release nobody used (its waiter
 * timed out) only makes a later waiter look once more. The release hands the lock over:
 * until a waiter it let through has looked (`handoff`), a thread that did not wait (the
 * one that just gave the lock back, taking it again at once: a group flush between two
 * chunks) yields, the interpreter lock released, instead of taking it first, which would
 * keep every waiter out for as long as it goes on; then it takes the lock or waits its
 * turn. A take that does not wait is never kept out. A build without the interpreter lock makes no StoreLock
 * (lock.py then uses threading.RLock). */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock gate;
    unsigned long owner;   /* the thread holding it (valid while count > 0) */
    unsigned long count;   /* how many times its owner took it (0: free) */
    unsigned long waiters; /* threads waiting on the gate */
    int handoff;           /* a release let a waiter through, which has not looked yet */
    PyObject *weakrefs;
} StoreLock;

static PyTypeObject StoreLockType;

/* the monotonic clock in microseconds */
static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* a waiter gives up (timed out, or a signal handler raised): a hand-over it may have been
 * let through for goes on to the next waiter, or ends */
static void leave(StoreLock *self) {
    self->waiters--;
    if (self->handoff && self->count == 0) {
        if (self->waiters > 0) PyThread_release_lock(self->gate);
        else self->handoff = 0;
    }
}

/* wait until the lock is free and take it for `me`, at most `us` microseconds (-1: for
 * ever); 1 got, 0 timed out, -1 with an exception (a signal handler raised) */
static int wait_for(StoreLock *self, unsigned long me, PY_TIMEOUT_T us) {
    long long deadline = us > 0 ? now_us() + us : 0;
    self->waiters++;
    for (;;) {
        PyLockStatus r;
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(self->gate, us, 1);
        Py_END_ALLOW_THREADS
        if (self->count == 0) { /* free (whether the gate let this thread through or not) */
            self->waiters--;
            self->handoff = 0;
            self->owner = me;
            self->count = 1;
            return 1;
        }
        if (r == PY_LOCK_INTR && Py_MakePendingCalls() < 0) { /* a signal handler raised */
            leave(self);
            return -1;
        }
        if (us > 0) {
            long long left = deadline - now_us();
            if (left <= 0) {
                leave(self);
                return 0;
            }
            us = (PY_TIMEOUT_T)left;
        }
    }
}

/* take it (us: as wait_for; 0 does not wait): 1 got, 0 not, -1 with an exception */
static int take(StoreLock *self, PY_TIMEOUT_T us) {
    unsigned long me = PyThread_get_thread_ident();
    while (self->handoff && self->count == 0 && us != 0) { /* a waiter let through looks first */
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
    if (self->count == 0) {
        self->owner = me;
        self->count = 1;
        return 1;
    }
    if (self->owner == me) {
        if (self->count == ULONG_MAX) {
            PyErr_SetString(PyExc_OverflowError, "the store lock was taken too many times");
            return -1;
        }
        self->count++;
        return 1;
    }
    return us == 0 ? 0 : wait_for(self, me, us);
}

/* give it back once, by the thread that holds it (the caller took it itself) */
static void give_held(StoreLock *self) {
    if (--self->count == 0) {
        self->owner = 0;
        if (self->waiters > 0) { /* one of them looks again, before anyone else takes it */
            PyThread_release_lock(self->gate);
            self->handoff = 1;
        }
    }
}

/* give it back once: 0, or -1 with RuntimeError when this thread does not hold it */
static int give(StoreLock *self) {
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    give_held(self);
    return 0;
}

int store_lock_check(PyObject *o) { return Py_TYPE(o) == &StoreLockType; }

int store_lock_enter(PyObject *o) { return take((StoreLock *)o, -1) < 0 ? -1 : 0; }

void store_lock_exit(PyObject *o) { give_held((StoreLock *)o); }

static PyObject *lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "StoreLock() takes no arguments");
        return NULL;
    }
    StoreLock *self = (StoreLock *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if ((self->gate = PyThread_allocate_lock()) == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate the store lock");
        return NULL;
    }
    PyThread_acquire_lock(self->gate, WAIT_LOCK); /* closed: a new lock, nobody holds it */
    return (PyObject *)self;
}

static void lock_dealloc(StoreLock *self) {
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    if (self->gate != NULL) {
        PyThread_release_lock(self->gate);
        PyThread_free_lock(self->gate);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *lock_acquire(StoreLock *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pd:acquire", kwlist, &blocking, &timeout)) return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyObject *given = PyFloat_FromDouble(timeout);
        if (given != NULL)
            PyErr_Format(PyExc_ValueError, "timeout value must be a non-negative number or -1, not %R", given);
        Py_XDECREF(given);
        return NULL;
    }
    if (timeout > (double)PY_TIMEOUT_MAX / 1e6) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    PY_TIMEOUT_T us = !blocking ? 0 : timeout == -1 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    int got = take(self, us);
    if (got < 0) return NULL;
    return PyBool_FromLong(got);
}

static PyObject *lock_enter(StoreLock *self, PyObject *unused) {
    if (take(self, -1) < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *lock_release(StoreLock *self, PyObject *unused) {
    if (give(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *lock_exit(StoreLock *self, PyObject *const *args, Py_ssize_t nargs) {
    if (give(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *lock_is_owned(StoreLock *self, PyObject *unused) {
    return PyBool_FromLong(self->count > 0 && self->owner == PyThread_get_thread_ident());
}

static PyObject *lock_repr(StoreLock *self) {
    return PyUnicode_FromFormat("<ackstore StoreLock %s owner=%lu count=%lu at %p>",
                                self->count > 0 ? "locked" : "unlocked", self->count > 0 ? self->owner : 0UL,
                                self->count, (void *)self);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock (again, when this thread holds it)"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "release(): give the lock back once"},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, "take the lock, waiting as long as it takes"},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL, "give the lock back once"},
    {"_is_owned", (PyCFunction)lock_is_owned, METH_NOARGS, "whether this thread holds the lock"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lock_members[] = {
    {"waiters", T_ULONG, offsetof(StoreLock, waiters), READONLY, "threads waiting for it now"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StoreLockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ackstore._native.StoreLock",
    .tp_basicsize = sizeof(StoreLock),
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_repr = (reprfunc)lock_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StoreLock(): a reentrant lock, the rule of threading.RLock, taken cheaply by `with` and by "
              "compiled code",
    .tp_weaklistoffset = offsetof(StoreLock, weakrefs),
    .tp_methods = lock_methods,
    .tp_members = lock_members,
    .tp_new = lock_new,
};

int lock_init(PyObject *m) {
#ifdef Py_GIL_DISABLED
    return 0; /* (its state is guarded by the interpreter lock: none here) */
#else
    if (PyType_Ready(&StoreLockType) < 0) return -1;
    return PyModule_AddObjectRef(m, "StoreLock", (PyObject *)&StoreLockType);
#endif
}
