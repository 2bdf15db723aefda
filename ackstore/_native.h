/* What the compiled parts of ackstore._native share (_native.c defines these; _small.c
 * uses them): a growing output buffer, and the pieces of the state layout and of a
 * state slot's value (ackstore/storage/records.py documents both), so each is written once. */
#ifndef ACKSTORE_NATIVE_H
#define ACKSTORE_NATIVE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The portable roaring serialization's cookies (with and without run containers), the
 * most values an array container holds, and the Rice code's escape (a quotient of this many
 * ones or more is written as that many ones and the raw 32-bit gap): _native.c's writers
 * and _acks.c's readers share them. */
#define COOKIE_RUNS 12347
#define COOKIE_NO_RUNS 12346
#define ARRAY_MAX 4096
#define RICE_ESCAPE 32

/* little-endian u16, u32 and u64 read at p */
static inline uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* big-endian u64 read and written at p (keys: a log key is the cursor id and the sequence,
 * each a big-endian u64, as records.py's _KEY packs them) */
static inline uint64_t get_u64_be(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}
static inline void put_u64_be(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}
static inline void put_log_key(unsigned char *key, uint64_t cid, uint64_t seq) {
    put_u64_be(key, cid), put_u64_be(key + 8, seq);
}

/* little-endian u16 and u32 written at p */
static inline void put16(unsigned char *p, uint32_t v) { p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; }
static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = v & 0xFF; p[1] = (v >> 8) & 0xFF; p[2] = (v >> 16) & 0xFF; p[3] = (v >> 24) & 0xFF;
}

/* bytes being written: `len` of `cap` used */
typedef struct {
    unsigned char *b;
    Py_ssize_t len, cap;
} Out;

/* room for `n` more bytes; -1 with MemoryError */
static inline int reserve(Out *o, Py_ssize_t n) {
    if (o->len + n > o->cap) {
        Py_ssize_t cap = o->cap * 2 > o->len + n ? o->cap * 2 : o->len + n + 64;
        unsigned char *b = (unsigned char *)PyMem_Realloc(o->b, cap);
        if (b == NULL) { PyErr_NoMemory(); return -1; }
        o->b = b;
        o->cap = cap;
    }
    return 0;
}

/* `n` more bytes, to be filled; NULL with MemoryError */
static inline unsigned char *out_room(Out *o, Py_ssize_t n) {
    if (reserve(o, n) < 0) return NULL;
    unsigned char *at = o->b + o->len;
    o->len += n;
    return at;
}

static inline int put_varint(Out *o, unsigned long long v) {
    if (reserve(o, 10) < 0) return -1; /* room for the longest */
    unsigned char *at = o->b + o->len;
    while (v >= 0x80) { *at++ = (unsigned char)((v & 0x7F) | 0x80); v >>= 7; }
    *at++ = (unsigned char)v;
    o->len = at - o->b;
    return 0;
}

/* zlib.crc32(p[:n], crc); -1 with an exception set when zlib fails */
int64_t crc32_of(const unsigned char *p, Py_ssize_t n, uint32_t crc);
/* a bitmap's maximal runs (first, last) in two PyMem buffers the caller frees; their number, or -1 */
Py_ssize_t bitmap_runs(PyObject *bitmap, uint32_t **firsts, uint32_t **lasts);

/* The state layout's head: its tag, `flags`, the cursor id, the mark-delete position and the
 * number of ledgers that follow. */
int put_state_head(Out *o, int flags, unsigned long long cid, long long md_l, long long md_e, Py_ssize_t ledgers);
/* One ledger's runs in the state layout, `pos` the first entry a run may start at (M + 1 in
 * the mark-delete ledger): their number, then each one's gap and length. The i-th run is
 * (firsts[i * stride], lasts[i * stride]). ValueError for a run below `pos`. */
int put_state_runs(Out *o, long long ledger, const uint32_t *firsts, const uint32_t *lasts, Py_ssize_t stride,
                   Py_ssize_t n, long long pos);
/* One ledger's partial batches in the state layout (after its runs), `d` {entry: (size,
 * mask)}: their number, then per entry, ascending from `start`, its gap from the one
 * before, the batch's size and its mask's bytes. ValueError for an entry below `start`. */
int put_state_batches(Out *o, PyObject *d, long long ledger, long long start);
/* One ledger's delivery counts in the state layout (after its runs and partial batches):
 * their number, then per counted entry, ascending from `start`, its gap from the one
 * before and its count - 1; the i-th is (entries[i * stride], ns[i * stride]). ValueError
 * for an entry below `start` or a count of 0. */
int put_state_counts(Out *o, long long ledger, const uint32_t *entries, const uint32_t *ns, Py_ssize_t stride,
                     Py_ssize_t n, long long start);
/* The fixed envelope (type `rtype`, format `version`) of the record from o->b + at to the end,
 * written into its first 7 bytes (left for it). -1 with an exception set. */
int seal_envelope_at(Out *o, Py_ssize_t at, uint32_t rtype, uint32_t version);
/* Where a cursor's next state goes and the room its value keeps (cursor/chain.py's
 * next_slot, the same rule): the state slot the newest state (in `slot`) is not in, and
 * into *room `first_room` zero bytes when that slot holds no value yet (`slots`: bits 0
 * and 1, which slots hold one), else 0. */
static inline int next_slot(int slot, int slots, Py_ssize_t first_room, Py_ssize_t *room) {
    int to = 1 - slot;
    *room = (slots >> to) & 1 ? 0 : first_room;
    return to;
}
/* The zero bytes of room a state slot's value of `len` bytes (a first value's reserve not
 * counted) takes more, up to the next multiple of SLOT_ALIGN (records.py's slot_padding and
 * SLOT_ALIGN, the same rule: a value that keeps its length is written over the old one in
 * place). */
#define SLOT_ALIGN 16
static inline Py_ssize_t slot_padding(Py_ssize_t len) { return (SLOT_ALIGN - len % SLOT_ALIGN) % SLOT_ALIGN; }
/* cursor/chain.py's rules on plain values, written once for every compiled part: its
 * SMALL_CHAIN and GARBAGE_FACTOR as chain_setup (_chain.c) last gave them (0 before it ran:
 * see chain_rules_ready). */
extern long long chain_small, chain_garbage;
/* whether chain_setup gave the chain's rules their bounds (0, with RuntimeError, before) */
static inline int chain_rules_ready(const char *function) {
    if (chain_small > 0) return 1;
    PyErr_Format(PyExc_RuntimeError, "%s before chain_setup", function);
    return 0;
}
/* chain.allowance: the bytes a chain of deltas may reach past a full marker of `full_bytes` */
static inline unsigned long long chain_allowance(unsigned long long full_bytes) {
    return full_bytes > (unsigned long long)chain_small ? full_bytes : (unsigned long long)chain_small;
}
/* chain.outgrown: whether a chain's deltas make its next marker a full one */
static inline int chain_outgrown(long long deltas, long long every, unsigned long long chain_bytes,
                                 unsigned long long full_bytes) {
    return deltas >= every || chain_bytes > chain_allowance(full_bytes);
}
/* chain.full_marker: full when due, or when it covers the whole index repeating at most
 * SMALL_CHAIN bytes the chain named already (`named` u32s) */
static inline int chain_full_marker(int due, int covering, unsigned long long named) {
    return due || (covering && 4 * named <= (unsigned long long)chain_small);
}
/* chain.garbage_due: whether the bytes written since the last trim call for one */
static inline int chain_garbage_due(unsigned long long untrimmed, unsigned long long full_bytes) {
    return untrimmed > (unsigned long long)chain_garbage * chain_allowance(full_bytes);
}
/* 0 when the compiled `function` got `want` arguments and its part of the module was set up
 * (`set_up`); else -1 with TypeError (its `usage`) or RuntimeError ("`function` before
 * `setup`"). */
static inline int call_ready(const char *function, const char *usage, Py_ssize_t nargs, Py_ssize_t want, int set_up,
                             const char *setup) {
    if (nargs != want) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    if (!set_up) {
        PyErr_Format(PyExc_RuntimeError, "%s before %s", function, setup);
        return -1;
    }
    return 0;
}
/* A state slot's key: 0xFF, the slot, the cursor id as a big-endian u64 (10 bytes). */
void put_slot_key(unsigned char *key, unsigned long long cid, int slot);
/* A state slot's head, the bytes before its record: the sequence as a varint, the CRC32 of
 * the slot's key and that varint, `reserve` zero bytes. Its length: */
Py_ssize_t slot_head_len(unsigned long long seq, Py_ssize_t reserve);
/* ... and the key (10 bytes into `key`) and the head (into `v`, slot_head_len bytes). */
void put_slot_head(unsigned char *key, unsigned char *v, unsigned long long cid, int slot, unsigned long long seq,
                   Py_ssize_t reserve);

/* The readers, each the inverse of a writer above. Every one checks each length and count
 * before it uses it, and raises the ValueError of its twin in pure_codecs.py for damage. */

/* bytes being read, from `i` */
typedef struct {
    const unsigned char *p;
    Py_ssize_t len, i;
} Reader;

#define U32_MAX_LL 4294967295LL
/* a fixed marker's prev for none (-1 given): pure_codecs.NO_PREV */
#define NO_PREV 0xFFFFFFFFu
#define LEDGER_MAX_LL 9223372036854775807LL
#define RECORD_MARKER 2 /* a marker record's type (records.py) */
#define RECORD_CURSOR 4 /* a cursors catalog entry's type (catalog.py) */
#define STATE_PROPS 0x01 /* the state layout's flags: properties follow the ledgers, */
#define STATE_BATCHES 0x02 /* ... each ledger has partial batches, */
#define STATE_COUNTS 0x04 /* ... and delivery counts, */
#define STATE_TRUNCATED 0x08 /* ... and it holds only the lowest ranges a flush persists (PIP-299) */

/* An int argument in lo..hi, as pure_codecs._ranged checks it: ValueError "NAME=VALUE is
 * outside LO..HI" for any other int (never OverflowError), TypeError for a non-int. */
int ranged_arg(PyObject *obj, const char *name, long long lo, long long hi, long long *out);
/* the count of the values a coder is given (a buffer of native-endian uint32); -1 with ValueError
 * for a length not a multiple of 4 or no values (pure_codecs.uint32_values' rule) */
Py_ssize_t coded_count(const Py_buffer *raw);
/* A ledger record's body, as read_ledger_body reads it: its fields (`owner` when n >= 8), the
 * number of partial batches and of delivery-count items, and the lowest and highest entry
 * holding any state (first and last ack, partial batches, delivery counts; 2**32 and -1 when
 * none). */
typedef struct {
    uint32_t n, nb, nc;
    int64_t ledger, flags, first, last, runs, owner, low, high;
    const unsigned char *payload;
    Py_ssize_t payload_len;
    const unsigned char *counts, *end; /* where the delivery-count items start, and the body's end */
} LedgerBody;
/* 0, or -1 (no exception) when `body` is not a ledger record's body (the fields above; _native.c's
 * LEDGER_SHAPE). */
int read_ledger_body(const unsigned char *body, Py_ssize_t len, LedgerBody *f);
/* f's nc delivery-count items (entry, count, entry, count, ...: ints) into out; -1 (no
 * exception) when they are not ints. */
int ledger_count_items(const LedgerBody *f, int64_t *out);
/* The portable roaring serialization of the set of runs [b[2i], b[2i + 1]) (`nb` bounds,
 * ascending, a gap between two runs, all below 2**32), each container in its smallest form
 * (_acks.c's docstring). NULL with an exception set. O(runs + containers + the bytes written). */
PyObject *roaring_of_bounds(const uint64_t *b, Py_ssize_t nb);
/* The runs of the acks a ledger record's bitmap fields hold (its flags, its span first..last
 * and its code: one acks_roaring reads, a stride of acks or holes, no holes (one run, the
 * empty roaring form), no acks (flags 0, no code)), ascending, each written at dst as its
 * first and last entry with `offset` added (up to `room` runs), their number into *n and one
 * past the last one's last entry (offset not added; 0: none) into *end; 1 when they are more
 * than `room`, -1 with ValueError for damage or another code, or with MemoryError.
 * pure_acks.record_bounds' runs, the same. O(values). */
int ledger_runs_into(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                     long long offset, uint32_t *dst, Py_ssize_t room, Py_ssize_t *n, long long *end);

/* One ledger's partial batches ({entry: (size, mask)}, `batches` 1) or delivery counts
 * ({entry: count}) in the state layout, as state_fields reads them, entries from `start`;
 * *highest the last entry read. NULL with an exception (ValueError for damage). */
PyObject *get_state_entries(Reader *r, unsigned long long start, long long ledger, int batches,
                            unsigned long long *highest);
/* pure_codecs.read_varint: the varint at r, at most `most`; ValueError naming `kind`'s `what` */
int get_varint_of(Reader *r, unsigned long long most, const char *kind, const char *what, unsigned long long *out);
/* A reader of the few msgpack types a ledger record's body and a small marker's hold: ints
 * (64-bit signed range), arrays, bins. Each returns -1 at the end of the bytes or at another
 * type. */
typedef struct {
    const unsigned char *p, *end;
} mp_reader;
int mp_int(mp_reader *m, int64_t *out);
/* a big-endian length of `bytes` bytes at m into *out (-1: too short) */
int mp_length(mp_reader *m, int bytes, uint32_t *out);
int mp_array(mp_reader *m, uint32_t *n);
/* A fixed-layout marker's body (records.py's module docstring) as format `version` wrote it
 * (from format 7 its items carry a count of delivery counts and the counts, from format 9 a
 * flags byte follows the tag: 0x01 a full marker; before 9 flags are 0): its head, and its
 * items from `items` (next_fixed_item reads them), checked to end within the body; `end`
 * where the properties start. */
typedef struct {
    unsigned flags;
    uint32_t prev, md_l, rp_l, cid;
    long long md_e, rp_e;
    uint16_t n;
    int with_counts;
    const unsigned char *items;
    Py_ssize_t end;
} FixedMarker;
/* One item of a fixed-layout marker: the ledger, its record's sequence (-1: the ledger
 * vanished) and run count, its acks since (nadds entries at `adds`, 4 bytes each, as written:
 * in any order, repeats possible; sorted_adds gives them ascending) and its delivery counts
 * since (ncounts (entry, count) pairs at `counts`, 8 bytes each). */
typedef struct {
    uint32_t ledger, runs;
    long long seq;
    uint16_t nadds, ncounts;
    const unsigned char *adds, *counts;
} FixedItem;
/* 0, or -1 with the ValueError delta_fields raises (pure_codecs.delta_fields' messages) */
int read_fixed_marker(const unsigned char *body, Py_ssize_t len, int version, FixedMarker *m);
/* the item at `at` (m->items, then what the last call returned) into *it; where the next one is */
const unsigned char *next_fixed_item(const FixedMarker *m, const unsigned char *at, FixedItem *it);
/* the item's acks since, ascending without repeats, into out (room for it->nadds); their number */
Py_ssize_t sorted_adds(const FixedItem *it, uint32_t *out);
/* A record's fixed envelope checked (its length, a version up to `max_version`, its
 * checksum); the type at p[1] is the caller's to look at. */
int envelope_ok(const unsigned char *p, Py_ssize_t len, long long max_version);
/* A state slot's head (put_slot_head's) checked against its `key`: the sequence, and where
 * the record starts (past the room). */
int get_slot_head(const unsigned char *key, Py_ssize_t klen, const unsigned char *v, Py_ssize_t len,
                  unsigned long long *seq, Py_ssize_t *start);
/* The state layout's head (put_state_head's): the flags, the cursor id, M's ledger and
 * entry + 1, and the number of ledgers. */
int get_state_head(Reader *r, int *flags, unsigned long long *cid, unsigned long long *md_l,
                   unsigned long long *md_e1, unsigned long long *n);
/* A ledger's id and number of runs (put_state_runs's); `last`: the lowest id it may have
 * (M's ledger for the first, then one past the one before), moved past it; `at`: where its
 * first run may start (M + 1 in M's ledger). */
int get_state_ledger(Reader *r, unsigned long long md_l, unsigned long long md_e1, unsigned long long *last,
                     unsigned long long *ledger, unsigned long long *nruns, unsigned long long *at);
/* The ledger's next run (first, last), `at` moved past it and its gap. */
int get_state_run(Reader *r, unsigned long long ledger, unsigned long long *at, unsigned long long *first,
                  unsigned long long *last);

/* A ledger's number of delivery counts (put_state_counts's first varint) ... */
int get_state_count_n(Reader *r, unsigned long long *n);
/* ... and its next delivery count: the entry and its count, `at` moved past it. */
int get_state_count(Reader *r, unsigned long long *at, unsigned long long *entry, unsigned long long *n);

/* each part adds its own to the module (PyInit__native, in _module.c, calls them in turn) */
int native_init(PyObject *module); /* _native.c */
int small_init(PyObject *module);  /* _small.c */
int acks_init(PyObject *module);   /* _acks.c */
int walk_init(PyObject *module);   /* _walk.c */
/* _small.c: Cursor.ack in a SmallState `small` of `pos`: one position (a 2-tuple of ints)
 * when `one`, else a list or tuple of them; with its cached limit of the topic's directory
 * at `version`; a form the ack changed first since its last flush is put on `listed` (the
 * store's dict of changed forms) with its `core`: 1 done, 3 done and over the form's cap
 * (the parts take it), 4 done and M moved on into the next ledger (the caller bounds the
 * form again), 0 declined having changed nothing (not a SmallState, another version, a
 * position the form does not take), -1 with an exception */
int small_ack(PyObject *small, PyObject *pos, int one, long long version, PyObject *listed, PyObject *core);
/* _ack.c: ack_position and ack_setup */
int ack_init(PyObject *m);
/* _lock.c: the StoreLock type; store_lock_check: 1 when `o` is one; store_lock_enter takes
 * it (waiting, the interpreter lock released): 0, or -1 with an exception; store_lock_exit
 * gives back once what the caller's own store_lock_enter took (the thread holds it: no
 * look at its owner) */
int lock_init(PyObject *m);
int store_lock_check(PyObject *o);
int store_lock_enter(PyObject *o);
void store_lock_exit(PyObject *o);
/* _puts.c: the Puts type (a flush's (key, value) pairs in one buffer); puts_new makes an
 * empty one, puts_add copies one more pair into it: 0, or -1 with an exception */
int puts_init(PyObject *m);
PyObject *puts_new(void);
int puts_add(PyObject *puts, const unsigned char *key, Py_ssize_t klen, const unsigned char *value, Py_ssize_t vlen);
/* _fields.c: the field type named `name` (unqualified), borrowed; NULL when none was made */
PyTypeObject *fields_type_named(const char *name);

#endif
