/* ackstore._native.SmallState, flush_small and undo_small: the compiled twins of the class
 * and functions of the same names in ackstore/cursor/small.py (which says what the small
 * form is, and when a cursor takes it).
 *
 * A SmallState is one object of its own: the cursor's mark-delete position, its read
 * position, its log's next sequence and state slots, the runs of acks above M as pairs of
 * u32 (first, last), ascending, a gap between two, in the object up to OWN_RUNS runs and in
 * a PyMem buffer beyond (read and written through run_first, run_last and the runs_ functions
 * alone: their layout is theirs), and the delivery counts of entries above M as pairs of u32 (entry,
 * count), ascending, in a PyMem buffer. Entries are the form's: M's ledger's own, and once
 * M's ledger is sealed and ledgers follow it, theirs after them on one line: the i-th
 * spanned ledger span_l[i]'s entry e is the form's span_o[i] + e (cursor/small_span.py maps
 * positions; M never rests at span_o[0] - 1: it moves on into span_l[0], which becomes M's
 * ledger). An ack or a delivery writes
 * here; a flush encodes each changed one's state slot value with the state layout's own
 * writers (_native.h) and adopts it in the same visit. Its fields are read from Python
 * through the members below, never through another class.
 */
#include "_native.h"
#include "_chain.h"
#include <string.h>
#include <structmember.h>

#define OWN_RUNS 4
#define UNDO 0x80 /* in `undo`: the last flush took this one (the low bits: its slots before) */
#define UNDO_CUT 0x40 /* in `undo`: its newest state before that flush was cut (PIP-299: `truncated`) */
#define MAX_BATCH_SIZE 65536 /* cursor/moves.py's MAX_BATCH_SIZE: the largest batch */
#define ENTRY_MAX 0xFFFFFFFFLL
#define SPAN_MOST 255 /* cursor/small_span.py's SPAN_MOST: the most ledgers after M's on the form's line (ns,
                        * span_room and rp_i are u8; the arrays of a line's ledgers on the stack are this big) */
#define DELTA_MOST 256 /* cursor/small.py's DELTA_MOST: the most acks and counts a delta marker of the form's chain names */
#define FIXED_FULL 0x01 /* storage/records.py's FIXED_FULL: a fixed marker's flag of a full one */
#define U32 0xFFFFFFFFULL
#define NO_LOW 0x100000000LL /* small.py's _NO_LOW: an entry past every one (`low` of a record holding no acks) */
#define LOW_LATER (-2LL)     /* `low` of a form whose runs are not read yet: set when they are */
#define LEDGER_CHARGE 200 /* ledger_acks.py's LEDGER_OVERHEAD_BYTES, cursor/small.py's RANGE_CHARGE and */
#define RANGE_CHARGE 8    /* BATCH_CHARGE: what a ledger holding state, a run or a delivery count, a partial */
#define BATCH_CHARGE 64   /* batch of the form is charged against its cursor's cache budget (docs/cursors.md) */

/* a set of the ledgers of a form's line (bit k: the k-th, 0 M's): as many as a line holds, so
 * that a chain of the form's records any of them (cursor/small.py keeps it in an int) */
#define LINE_LEDGERS (SPAN_MOST + 1)
typedef struct {
    uint64_t w[LINE_LEDGERS / 64];
} Ledgers;
_Static_assert(LINE_LEDGERS % 64 == 0, "a line's ledgers fill whole words");
#define LW (LINE_LEDGERS / 64)

static inline int lg_has(const Ledgers *b, int k) { return k >= 0 && k < LINE_LEDGERS && (b->w[k >> 6] >> (k & 63) & 1); }
static inline void lg_add(Ledgers *b, int k) { b->w[k >> 6] |= 1ULL << (k & 63); }
static inline int lg_any(const Ledgers *b) {
    uint64_t x = 0;
    for (int i = 0; i < LW; i++) x |= b->w[i];
    return x != 0;
}
static inline int lg_count(const Ledgers *b) {
    int n = 0;
    for (int i = 0; i < LW; i++) n += __builtin_popcountll(b->w[i]);
    return n;
}
/* the highest ledger in b (-1: none) */
static inline int lg_top(const Ledgers *b) {
    for (int i = LW - 1; i >= 0; i--)
        if (b->w[i]) return 64 * i + 63 - __builtin_clzll(b->w[i]);
    return -1;
}
static inline Ledgers lg_or(Ledgers a, const Ledgers *b) {
    for (int i = 0; i < LW; i++) a.w[i] |= b->w[i];
    return a;
}
static inline Ledgers lg_and(Ledgers a, const Ledgers *b) {
    for (int i = 0; i < LW; i++) a.w[i] &= b->w[i];
    return a;
}
static inline Ledgers lg_minus(Ledgers a, const Ledgers *b) { /* a without b */
    for (int i = 0; i < LW; i++) a.w[i] &= ~b->w[i];
    return a;
}
static inline int lg_eq(const Ledgers *a, const Ledgers *b) { return memcmp(a, b, sizeof(Ledgers)) == 0; }
/* the line moved on by one ledger (M's left it): bit k + 1 becomes bit k */
static inline void lg_down(Ledgers *b) {
    for (int i = 0; i < LW; i++) b->w[i] = b->w[i] >> 1 | (i + 1 < LW ? b->w[i + 1] << 63 : 0);
}
/* ledgers k..last (0 <= k <= last < LINE_LEDGERS) added to b */
static inline void lg_add_span(Ledgers *b, int k, int last) {
    for (; k <= last; k++) lg_add(b, k);
}
/* b as an int (bit k: the k-th ledger) */
static PyObject *lg_int(const Ledgers *b) {
    unsigned char bytes[LINE_LEDGERS / 8];
    for (int i = 0; i < LW; i++)
        for (int j = 0; j < 8; j++) bytes[8 * i + j] = (unsigned char)(b->w[i] >> (8 * j));
    return _PyLong_FromByteArray(bytes, sizeof(bytes), 1, 0);
}
/* the int `v` as a set of a line's ledgers into *b: 1; 0 when it is not one (negative, or a
 * bit past the line's most); -1 with an exception when it is no int */
static int lg_of(PyObject *v, Ledgers *b) {
    memset(b, 0, sizeof(*b));
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "a set of a line's ledgers is an int, not %R", v);
        return -1;
    }
    if (_PyLong_Sign(v) < 0) return 0;
    size_t bits = _PyLong_NumBits(v);
    if (bits == (size_t)-1 && PyErr_Occurred()) return -1;
    if (bits > LINE_LEDGERS) return 0;
    unsigned char bytes[LINE_LEDGERS / 8];
    if (_PyLong_AsByteArray((PyLongObject *)v, bytes, sizeof(bytes), 1, 0) < 0) return -1;
    for (int i = 0; i < LW; i++) {
        uint64_t w = 0;
        for (int j = 7; j >= 0; j--) w = w << 8 | bytes[8 * i + j];
        b->w[i] = w;
    }
    return 1;
}

/* where the newest state is, when it is a chain's (cursor/small.py's PySmallState says each
 * field): a flush changes it, undo_small puts back the copy the flush kept */
typedef struct {
    long long base;                 /* -1 a state slot, -2 the log (the parts wrote it), else the chain's newest full marker */
    long long marker;               /* the chain's newest marker */
    long long record;               /* the chain's oldest record (-1: none) */
    Ledgers recs;                   /* the ledgers of the line it has a record of (SmallState.rec says which) */
    Ledgers stale;                  /* those whose next record is due (changed past what a marker names) */
    unsigned long long chain_bytes, base_bytes, untrimmed;
    uint32_t deltas;                /* delta markers since the full marker */
    uint8_t tail;                   /* log keys under the slots */
    uint8_t passed;                 /* M moved past entries of its ledger's record since it was written:
                                       one range more in that ledger than above M (a marker counts it) */
} Chain;

typedef struct {
    PyObject_HEAD
    long long md_l, md_e, rp_e;
    long long *span_l;              /* the ledgers after M's on the form's line (ns of them), ... */
    uint32_t *span_o;               /* ... each at its offset, ascending (equal: a ledger with no entries) */
    uint8_t ns, span_room, rp_i;    /* how many (room for; PyMem, NULL while none); the ledger of the line
                                       the read position is in (0: M's) */
    uint32_t *runs; /* 2 * n: first, last; in `rbuf` (room for `room` runs), after the runs M passed
                       since (their room taken back when the runs need it: room_for) ... */
    uint32_t *rbuf;
    struct RunChunk **ch;           /* ... or, past runs_flat_most of them, in `nch` chunks (room for `chroom`;
                                       NULL: one array), each of at most its room, none empty */
    uint32_t nch, chroom, fc, fbase; /* the chunk an index was last found in, and its first run's index */
    uint32_t viewed;                /* the runs held while runs_view shows the first n of them (0: no view) */
    uint32_t *stage;                /* runs_area's, while the runs are in chunks (PyMem; NULL: none) */
    uint32_t n, room, cap;
    uint32_t persist;               /* the most ranges a flush persists (PIP-299; 0: all) */
    uint8_t truncated;              /* its newest state holds only the lowest `persist` of them */
    PyObject *cut_record;           /* ... and then, that state's record as written (bytes; NULL: not known):
                                       a cut that holds, the same record again, is not written again */
    uint8_t over_cap;               /* it held more than `persist` at its last flush in this process */
    unsigned long long touched;     /* the lowest entry changed since its last flush (UNTOUCHED: none; 0:
                                       M, the line or the properties), and ... */
    unsigned long long cut_at;      /* ... the end of the cut that state holds (cut_end's): a change above it
                                       leaves the cut as it is (the record need not be made to see it) */
    uint32_t *counts; /* 2 * nc: entry, count, in `cbuf` (room for `croom`; NULL while it never held one),
                         after the room the counts dropped before them left (taken back when inserts need it) */
    uint32_t *cbuf;
    uint32_t nc, croom;
    uint32_t cdead_lo; /* none of them dropped in place below this index (while cdead) */
    uint32_t cdead; /* of those, dropped in place (count 0: an ack in the middle of many) and not taken out
                       yet (counts_tidy); each one's entry acked, never the first (passed reads that one) */
    uint32_t *bat;     /* 2 * nb: entry, size of each partial batch, ascending (NULL while it never held one) */
    PyObject **bmask;  /* ... and its mask, an int (bit i: index i acked; strong references) */
    uint32_t nb, broom;
    uint8_t dirty, slot, slots, undo, ended;
    uint8_t logged; /* its cursor keeps history: each state goes under its log key, not a slot */
    unsigned long long cursor_id, next_seq;
    unsigned long long flushes, flush_bytes, redeliveries;
    uint32_t persisted, undo_persisted, last_bytes;
    long long limit;                /* the form's highest entry allowed, as of ... */
    long long limit_version;        /* ... this version of the topic's directory (-1: none) */
    PyObject *props;                /* the properties, packed as the state layout writes them (b"": none) */
    Chain c, undo_c;                /* its chain, and as it was before the last flush took it */
    uint8_t undo_slot;              /* (and the slot then, */
    unsigned long long undo_next;   /* and the next sequence) */
    uint32_t every;                 /* the most delta markers after a base */
    long long budget;               /* its cursor's cache budget in bytes (-1: none): over_budget */
    uint8_t fresh;                  /* no delta marker possible now */
    uint8_t dropped;                /* acks M passed were left unnamed since M's ledger's record was written */
    long long low;                  /* the lowest entry of M's ledger its record and the chain's markers hold
                                       acked (NO_LOW: none; -1: not known; LOW_LATER: when the runs are read):
                                       while M is below it, the acks M passes go unnamed (passed) */
    PyObject *unread;               /* a lazy open's: M's ledger's record, its n runs not read yet (NULL: read) */
    long long unread_top;           /* ... and its highest entry, as the record says */
    uint32_t na, ncd;               /* the acks and counted entries since the chain's record, */
    uint32_t named, cnamed;         /* how many of each the markers named (the first ones) */
    uint32_t *adds, *counted;       /* (PyMem, DELTA_MOST each, NULL until the form keeps a chain) */
    long long *rec;                 /* rec[k]: the chain's record of the line's k-th ledger (its bit in c.recs),
                                       then the copy undo_small gives back (PyMem, 2 x LINE_LEDGERS; NULL until
                                       a chain) */
    uint32_t own[2 * OWN_RUNS];
} SmallState;

static PyTypeObject SmallStateType;

/* The runs live in one array while they are few (up to runs_flat_most) and in chunks past
 * that, so that an insert or a merge among many moves the runs of one chunk, not half the
 * runs. A chunk holds up to its room of runs, ascending; the chunks in order hold them all
 * (during cut_view the first `n` of them). Nothing outside the runs_ functions below knows
 * which: both layouts are theirs. */
typedef struct RunChunk {
    uint32_t n, room;
    uint32_t r[]; /* 2 * room: first, last */
} RunChunk;

static uint32_t runs_flat_most = 8192; /* the most runs held in one array (_set_run_chunks: tests lower it) */
static uint32_t runs_chunk_room = 512; /* a new chunk's room */

/* the runs' room before the first: left by the runs M passed (advance), and by runs merged or
 * inserted near the front (add_run moves the fewer runs) */
static inline uint32_t head_room(const SmallState *s) { return (uint32_t)((s->runs - s->rbuf) / 2); }

/* room for `need` runs from the first on, in the one array; -1 with MemoryError */
static int room_for(SmallState *s, uint32_t need) {
    uint32_t head = head_room(s);
    if (need + head <= s->room) return 0;
    if (need <= s->room) { /* the room before the first taken back */
        memmove(s->rbuf, s->runs, sizeof(uint32_t) * 2 * s->n);
        s->runs = s->rbuf;
        return 0;
    }
    uint32_t room = s->room * 2 > need ? s->room * 2 : need;
    uint32_t *r = PyMem_Malloc(sizeof(uint32_t) * 2 * room);
    if (r == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(r, s->runs, sizeof(uint32_t) * 2 * s->n);
    if (s->rbuf != s->own) PyMem_Free(s->rbuf);
    s->runs = s->rbuf = r;
    s->room = room;
    return 0;
}

static RunChunk *chunk_new(void) {
    RunChunk *c = PyMem_Malloc(sizeof(RunChunk) + sizeof(uint32_t) * 2 * runs_chunk_room);
    if (c != NULL) c->n = 0, c->room = runs_chunk_room;
    return c;
}

/* room for one more chunk pointer; -1 with MemoryError */
static int chunks_room(SmallState *s) {
    if (s->nch < s->chroom) return 0;
    uint32_t room = s->chroom ? 2 * s->chroom : 8;
    RunChunk **ch = PyMem_Realloc(s->ch, sizeof(RunChunk *) * room);
    if (ch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->ch = ch, s->chroom = room;
    return 0;
}

/* every chunk freed: the runs in one array again, none held */
static void chunks_free(SmallState *s) {
    for (uint32_t k = 0; k < s->nch; k++) PyMem_Free(s->ch[k]);
    PyMem_Free(s->ch);
    PyMem_Free(s->stage);
    s->ch = NULL, s->stage = NULL;
    s->nch = s->chroom = s->fc = s->fbase = 0;
}

/* the array's runs moved into chunks, each filled to three quarters of its room (room left
 * for inserts); -1 with MemoryError, the array as it was */
static int to_chunks(SmallState *s) {
    uint32_t fill = runs_chunk_room - runs_chunk_room / 4, need = (s->n + fill - 1) / fill;
    RunChunk **ch = PyMem_Malloc(sizeof(RunChunk *) * (need > 8 ? need : 8));
    if (ch == NULL) goto nomem;
    for (uint32_t k = 0; k < need; k++) {
        if ((ch[k] = chunk_new()) == NULL) {
            for (uint32_t x = 0; x < k; x++) PyMem_Free(ch[x]);
            PyMem_Free(ch);
            goto nomem;
        }
        uint32_t from = k * fill, m = s->n - from < fill ? s->n - from : fill;
        memcpy(ch[k]->r, s->runs + 2 * from, sizeof(uint32_t) * 2 * m);
        ch[k]->n = m;
    }
    if (s->rbuf != s->own) PyMem_Free(s->rbuf);
    s->runs = s->rbuf = s->own, s->room = OWN_RUNS;
    s->ch = ch, s->nch = need, s->chroom = need > 8 ? need : 8, s->fc = s->fbase = 0;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* The walks to a chunk start from the chunk found last, or from the first or the last chunk
 * when that is nearer: the acks of a cursor with many holes read the first runs (M's) and the
 * last (where acks land) by turns. Each sets s->fc and s->fbase, its first run's index;
 * O(chunks between). seek_run: to the chunk holding run i (the last chunk for i == the runs
 * held, one past its last run) */
static void seek_run(SmallState *s, uint32_t i) {
    uint32_t c = s->fc, b = s->fbase, last = s->nch - 1, held = s->viewed ? s->viewed : s->n;
    if (i < b / 2) c = 0, b = 0;
    else if (i >= b && held - i < i - b) c = last, b = held - s->ch[last]->n;
    while (i < b) b -= s->ch[--c]->n;
    while (i >= b + s->ch[c]->n && c < last) b += s->ch[c++]->n;
    s->fc = c, s->fbase = b;
}

/* seek_chunk: to chunk `to` */
static void seek_chunk(SmallState *s, uint32_t to) {
    uint32_t c = s->fc, b = s->fbase, last = s->nch - 1, held = s->viewed ? s->viewed : s->n;
    if (to < c / 2) c = 0, b = 0;
    else if (to > c + (last - c) / 2) c = last, b = held - s->ch[last]->n;
    while (c > to) b -= s->ch[--c]->n;
    while (c < to) b += s->ch[c++]->n;
    s->fc = c, s->fbase = b;
}

/* run i's pair in its chunk (i == the runs held: one past the last run of the last chunk):
 * seek_run's */
static uint32_t *chunk_run(SmallState *s, uint32_t i) {
    seek_run(s, i);
    return s->ch[s->fc]->r + 2 * (i - s->fbase);
}

/* The runs are read and written through these alone (their layout is theirs): run i's
 * first and last entry; run i set; the runs all moved `b` down the line; the first one
 * gone; all gone; `n` counted while none is held (a lazy open's runs not read yet); a view
 * of the first `n` (cut_view: the others stay, for cut_back); room for `m` more after the
 * last, filled in place by a decoder (runs_area), then taken (runs_took); every run in one
 * array (runs_flat: the layout's own, or copied into `*tmp`, which the caller frees). */
static inline uint32_t run_first(SmallState *s, uint32_t i) {
    return s->ch == NULL ? s->runs[2 * i] : chunk_run(s, i)[0];
}
static inline uint32_t run_last(SmallState *s, uint32_t i) {
    return s->ch == NULL ? s->runs[2 * i + 1] : chunk_run(s, i)[1];
}
static inline void run_put(SmallState *s, uint32_t i, uint32_t f, uint32_t l) {
    uint32_t *r = s->ch == NULL ? s->runs + 2 * i : chunk_run(s, i);
    r[0] = f;
    r[1] = l;
}
static void runs_shift(SmallState *s, uint32_t b) {
    if (s->ch == NULL) {
        for (uint32_t i = 0; i < 2 * s->n; i++) s->runs[i] -= b;
        return;
    }
    for (uint32_t k = 0; k < s->nch; k++)
        for (uint32_t i = 0; i < 2 * s->ch[k]->n; i++) s->ch[k]->r[i] -= b;
}

/* chunk k gone (it holds no run) */
static void chunk_drop(SmallState *s, uint32_t k) {
    PyMem_Free(s->ch[k]);
    memmove(s->ch + k, s->ch + k + 1, sizeof(RunChunk *) * (s->nch - k - 1));
    s->nch--;
    s->fc = s->fbase = 0;
    if (s->nch == 0) chunks_free(s); /* (one array again) */
}

static void runs_drop_first(SmallState *s) {
    s->n--;
    if (s->ch == NULL) {
        s->runs += 2; /* (its room taken back when the runs need it: room_for) */
        return;
    }
    RunChunk *c = s->ch[0];
    memmove(c->r, c->r + 2, sizeof(uint32_t) * 2 * --c->n);
    s->fc = s->fbase = 0;
    if (c->n == 0) chunk_drop(s, 0);
}
static void runs_clear(SmallState *s) {
    if (s->ch != NULL) chunks_free(s);
    s->n = 0;
}
static inline void runs_unread(SmallState *s, uint32_t n) { s->n = n; }
static inline void runs_view(SmallState *s, uint32_t n) {
    if (!s->viewed) s->viewed = s->n; /* (the runs held while a view shows fewer: seek_run) */
    s->n = n;
    if (n == s->viewed) s->viewed = 0;
}
static inline uint32_t *runs_area(SmallState *s, uint32_t m) {
    if (s->ch == NULL) return room_for(s, s->n + m) < 0 ? NULL : s->runs + 2 * s->n;
    PyMem_Free(s->stage);
    if ((s->stage = PyMem_Malloc(sizeof(uint32_t) * 2 * (m ? m : 1))) == NULL) PyErr_NoMemory();
    return s->stage;
}
static void chunks_delete(SmallState *s, uint32_t i, uint32_t d);

/* the `m` runs runs_area gave room for taken; -1 with MemoryError, none taken */
static int runs_took(SmallState *s, uint32_t m) {
    if (s->ch == NULL) {
        s->n += m;
        if (s->n > runs_flat_most && to_chunks(s) < 0) PyErr_Clear(); /* (the one array holds them as well) */
        return 0;
    }
    uint32_t at = 0;
    while (at < m) {
        RunChunk *c = s->ch[s->nch - 1];
        if (c->n == c->room) {
            if (chunks_room(s) < 0 || (c = chunk_new()) == NULL) { /* (those taken so far given back) */
                if (at) chunks_delete(s, s->n - at, at);
                return -1;
            }
            s->ch[s->nch++] = c;
        }
        uint32_t k = m - at < c->room - c->n ? m - at : c->room - c->n;
        memcpy(c->r + 2 * c->n, s->stage + 2 * at, sizeof(uint32_t) * 2 * k);
        c->n += k, s->n += k, at += k;
    }
    PyMem_Free(s->stage);
    s->stage = NULL;
    return 0;
}
static const uint32_t *runs_flat(SmallState *s, uint32_t **tmp) {
    *tmp = NULL;
    if (s->ch == NULL) return s->runs;
    uint32_t *r = PyMem_Malloc(sizeof(uint32_t) * 2 * (s->n ? s->n : 1));
    if (r == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (uint32_t k = 0, at = 0; at < s->n; k++) {
        uint32_t m = s->ch[k]->n < s->n - at ? s->ch[k]->n : s->n - at;
        memcpy(r + 2 * at, s->ch[k]->r, sizeof(uint32_t) * 2 * m);
        at += m;
    }
    return *tmp = r;
}

/* runs i..i + d - 1 gone from the chunks, and a chunk they leave joined to the next when the
 * two fill at most half of one (so that chunks stay a quarter full or more, as merges go) */
static void chunks_delete(SmallState *s, uint32_t i, uint32_t d) {
    while (d) {
        uint32_t *r = chunk_run(s, i), k = s->fc;
        RunChunk *c = s->ch[k];
        uint32_t o = i - s->fbase, take = d < c->n - o ? d : c->n - o;
        memmove(r, r + 2 * take, sizeof(uint32_t) * 2 * (c->n - o - take));
        c->n -= take, s->n -= take, d -= take;
        if (c->n == 0) {
            chunk_drop(s, k);
            if (s->ch == NULL) return;
        } else if (k + 1 < s->nch && c->n + s->ch[k + 1]->n <= c->room / 2) {
            RunChunk *next = s->ch[k + 1];
            memmove(next->r + 2 * c->n, next->r, sizeof(uint32_t) * 2 * next->n);
            memcpy(next->r, c->r, sizeof(uint32_t) * 2 * c->n);
            next->n += c->n, c->n = 0;
            chunk_drop(s, k);
        }
    }
}

/* a run (f, l) inserted at i in the chunks, a full chunk split in two first; -1 with MemoryError */
static int chunks_insert(SmallState *s, uint32_t i, uint32_t f, uint32_t l) {
    uint32_t *r = chunk_run(s, i), k = s->fc;
    RunChunk *c = s->ch[k];
    if (c->n == c->room) {
        RunChunk *half;
        if (chunks_room(s) < 0 || (half = chunk_new()) == NULL) return -1;
        half->n = c->n / 2;
        memcpy(half->r, c->r + 2 * (c->n - half->n), sizeof(uint32_t) * 2 * half->n);
        c->n -= half->n;
        memmove(s->ch + k + 2, s->ch + k + 1, sizeof(RunChunk *) * (s->nch - k - 1));
        s->ch[k + 1] = half;
        s->nch++;
        r = chunk_run(s, i), k = s->fc, c = s->ch[k];
    }
    uint32_t o = i - s->fbase;
    memmove(r + 2, r, sizeof(uint32_t) * 2 * (c->n - o));
    r[0] = f, r[1] = l;
    c->n++, s->n++;
    return 0;
}

/* runs i..j - 1 (none: i == j, an insert) made one run (f, l), moving the fewer runs, those
 * before (into the room before the first) or those after; in chunks, the runs of the chunks
 * they are in. 0; -1 with MemoryError (an insert without room: nothing changed) */
static int runs_splice(SmallState *s, uint32_t i, uint32_t j, uint32_t f, uint32_t l) {
    if (s->ch == NULL && i == j && s->n >= runs_flat_most && to_chunks(s) < 0) PyErr_Clear(); /* (stays one array) */
    if (s->ch != NULL) {
        if (i == j) return chunks_insert(s, i, f, l);
        run_put(s, i, f, l);
        if (j > i + 1) chunks_delete(s, i + 1, j - i - 1);
        return 0;
    }
    uint32_t *r = s->runs, n = s->n;
    if (i == j) {
        if (i < n - i && head_room(s) > 0) { /* the runs before it one down, into the room before the first */
            s->runs = r -= 2;
            memmove(r, r + 2, sizeof(uint32_t) * 2 * i);
        } else {
            if (room_for(s, n + 1) < 0) return -1;
            r = s->runs;
            memmove(r + 2 * i + 2, r + 2 * i, sizeof(uint32_t) * 2 * (n - i));
        }
        s->n = n + 1;
    } else {
        uint32_t gone = j - i - 1; /* the runs merged into run i */
        if (i < n - j) { /* the fewer before it: run i at j - 1, those before it up behind it */
            memmove(r + 2 * gone, r, sizeof(uint32_t) * 2 * i);
            s->runs = r += 2 * gone;
        } else
            memmove(r + 2 * i + 2, r + 2 * j, sizeof(uint32_t) * 2 * (n - j));
        s->n = n - gone;
    }
    run_put(s, i, f, l);
    return 0;
}

/* the first run ending at or after e among the first n (n when none): in chunks, the chunk
 * first (by its last run), then in it */
static uint32_t run_from(SmallState *s, unsigned long long e) {
    uint32_t lo = 0, hi = s->n;
    if (s->ch != NULL) {
        uint32_t a = 0, z = s->nch;
        while (a < z) {
            uint32_t mid = (a + z) / 2;
            RunChunk *c = s->ch[mid];
            if (c->r[2 * c->n - 1] < e) a = mid + 1;
            else z = mid;
        }
        if (a == s->nch) return s->n;
        seek_chunk(s, a); /* (the index of chunk a's first run) */
        uint32_t b = s->fbase;
        if (b >= s->n) return s->n;
        const uint32_t *r = s->ch[a]->r;
        uint32_t x = 0, y = s->ch[a]->n;
        while (x < y) {
            uint32_t mid = (x + y) / 2;
            if (r[2 * mid + 1] < e) x = mid + 1;
            else y = mid;
        }
        return b + x < s->n ? b + x : s->n;
    }
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (run_last(s, mid) < e) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static uint32_t run_from(SmallState *s, unsigned long long e);

static uint32_t ranges_in(SmallState *s, int k, uint32_t *first);
static void stash(SmallState *s);
static int rec_room(SmallState *s);
static Ledgers held_of(SmallState *s);
static int marker_write(SmallState *s, uint32_t version, int full, long long prev, const Ledgers *renamed, Out *out);
static int past_layout(SmallState *s, long long prev, const Ledgers *recs);
static uint32_t live_counts(SmallState *s, uint32_t from, uint32_t to);
static int over_acks(SmallState *s, uint32_t max_acks);
static void adopted(SmallState *s, unsigned long long seqs, uint32_t nbytes, int cut);

/* the next state cannot be a delta marker of the form's chain: it is written whole */
static inline void unchain(SmallState *s) {
    s->fresh = 1;
    s->na = s->ncd = s->named = s->cnamed = 0;
    s->c.passed = s->dropped = 0;
    s->low = -1;
}

#define UNTOUCHED (ENTRY_MAX + 2ULL)

/* the form changed at entry `e` (0: M, the line or the properties) */
static inline void touch(SmallState *s, unsigned long long e) {
    s->dirty = 1;
    if (e < s->touched) s->touched = e;
}

/* the chain's next state may be a delta marker (the last marker named every change): its
 * acks and counts since are tracked from here; stays fresh without the room to track them */
static void rechain(SmallState *s) {
    s->na = s->ncd = s->named = s->cnamed = 0;
    if (s->adds == NULL && (s->adds = PyMem_Malloc(sizeof(uint32_t) * 2 * DELTA_MOST)) != NULL)
        s->counted = s->adds + DELTA_MOST;
    s->fresh = s->adds == NULL;
}

/* the form's first entry in the line's k-th ledger (0: M's), and the first past it */
static inline unsigned long long line_start(SmallState *s, int k) { return k ? s->span_o[k - 1] : 0; }
static inline unsigned long long line_end(SmallState *s, int k) { return k < s->ns ? s->span_o[k] : U32 + 1; }

/* the lowest entry of M's ledger the form holds acked (NO_LOW: none): `low` of a chain whose
 * records hold what the form holds there */
static inline long long held_low(SmallState *s) {
    return s->n && run_first(s, 0) < line_end(s, 0) ? (long long)run_first(s, 0) : NO_LOW;
}

/* A lazy open's form at its first use: the runs of M's ledger's record, which the open checked
 * bar this decode (record_into), read into the form, as an eager open reads them. -1 with
 * CorruptRecordError when they do not decode to what the record said (its checksum held at the
 * open: a writer's fault), or with MemoryError; the record stays for the next try. O(its values). */
static int read_unread(SmallState *s) {
    PyObject *rec = s->unread;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(rec);
    Py_ssize_t len = PyBytes_GET_SIZE(rec), m = 0;
    uint32_t n = s->n;
    long long end = 0;
    LedgerBody f;
    int rc = read_ledger_body(p + 7, len - 7, &f) < 0;
    runs_unread(s, 0); /* (while unread, `n` counts the record's runs: none held yet) */
    uint32_t *area = rc ? NULL : runs_area(s, n);
    if (!rc && area == NULL) {
        runs_unread(s, n);
        return -1;
    }
    if (!rc) rc = ledger_runs_into(f.flags, f.first, f.last, f.payload, f.payload_len, 0, area, n, &m, &end);
    if (rc < 0 && !PyErr_ExceptionMatches(PyExc_ValueError)) {
        runs_unread(s, n);
        return -1;
    }
    PyErr_Clear();
    if (rc || m != n || (long long)area[0] <= s->md_e + 1 || (long long)area[2 * m - 1] != s->unread_top) {
        runs_unread(s, n); /* (CorruptRecordError, as a lazy open's parts say of a ledger that does not decode at its use) */
        PyObject *errors = PyImport_ImportModule("ackstore.errors");
        PyObject *kind = errors == NULL ? NULL : PyObject_GetAttrString(errors, "CorruptRecordError");
        Py_XDECREF(errors);
        if (kind != NULL)
            PyErr_Format(kind, "cursor id %llu: the record of ledger %lld its open checked does not decode to its %u "
                         "ranges; run 'ackstore check' on the store", s->cursor_id, s->md_l, n);
        Py_XDECREF(kind);
        return -1;
    }
    if (runs_took(s, n) < 0) {
        runs_unread(s, n);
        return -1;
    }
    s->unread = NULL;
    Py_DECREF(rec);
    if (s->low == LOW_LATER) s->low = held_low(s);
    return 0;
}

/* a lazy open's form read (read_unread) before anything else uses it: the methods' wrappers */
#define READ_FIRST(name)                                                                   \
    static PyObject *name##_read(SmallState *s, PyObject *arg) {                           \
        return s->unread != NULL && read_unread(s) < 0 ? NULL : name(s, arg);              \
    }
#define READ_FIRST_FAST(name)                                                                     \
    static PyObject *name##_read(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {        \
        return s->unread != NULL && read_unread(s) < 0 ? NULL : name(s, args, nargs);             \
    }

/* which ledger of the line the form's entry e is in (0: M's): how many offsets are at most e
 * (ascending; equal for a ledger with no entries). O(log spans) */
static int line_index(SmallState *s, unsigned long long e) {
    int lo = 0, hi = s->ns;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->span_o[mid] <= e) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* whether every ledger of the line holding an entry of f..l has a record in the chain (a
 * ledger with no entries holds none: small.py's _recorded) */
static int recorded(SmallState *s, unsigned long long f, unsigned long long l) {
    for (int k = line_index(s, f), last = line_index(s, l); k <= last; k++)
        if (!lg_has(&s->c.recs, k) && line_start(s, k) < line_end(s, k)) return 0;
    return 1;
}

/* entries f..l changed past what the chain's markers name: the next state is a new base holding
 * a new record of each ledger of the line they are in (small.py's _stale) */
static void stale(SmallState *s, unsigned long long f, unsigned long long l) {
    lg_add_span(&s->c.stale, line_index(s, f), line_index(s, l));
}

/* whether the chain tracks changes to entries f..l since its records: every ledger of the line
 * holding one has a record (recorded), and not every one is due a new record (c.stale: the next
 * base records what it holds). small.py's _tracks */
static int tracks(SmallState *s, unsigned long long f, unsigned long long l) {
    int k = line_index(s, f), last = line_index(s, l), due = 1;
    for (; due && k <= last; k++)
        if (!lg_has(&s->c.stale, k)) due = 0;
    return !due && recorded(s, f, l);
}

/* entries f..l are acked now, runs i..j (those touching them) acked before: the others go to
 * the acks since the chain's last marker, while their ledgers have a record not due (else
 * those are due new ones, which hold them: stale) and they are at most DELTA_MOST with the
 * counted entries (past that, their ledgers are due new records: small.py's _track) */
static void track(SmallState *s, uint32_t f, uint32_t l, uint32_t i, uint32_t j) {
    if (s->fresh) return;
    if (!tracks(s, f, l)) {
        stale(s, f, l);
        return;
    }
    long long e = f, most = DELTA_MOST - (long long)s->ncd;
    for (uint32_t k = i; k <= j; k++) {
        long long stop = k < j ? (long long)run_first(s, k) - 1 : (long long)l;
        if (stop > (long long)l) stop = l;
        if (e <= stop) {
            if ((long long)s->na + stop - e + 1 > most) {
                stale(s, f, l);
                return;
            }
            for (long long x = e; x <= stop; x++) s->adds[s->na++] = (uint32_t)x;
        }
        if (k < j && (long long)run_last(s, k) + 1 > e) e = (long long)run_last(s, k) + 1;
    }
}

/* entry e's delivery count set: one of the counts since the chain's records (one the markers
 * named is to be named again), while its ledger has a record not due (else the next base
 * records it: stale) and they are at most DELTA_MOST with the acks since (past that, its
 * ledger is due a record: small.py's _counted) */
static void count_since(SmallState *s, uint32_t e) {
    if (!tracks(s, e, e)) {
        stale(s, e, e);
        return;
    }
    uint32_t c = 0;
    while (c < s->ncd && s->counted[c] != e) c++;
    if (c == s->ncd) {
        if (s->ncd + s->na < DELTA_MOST) s->counted[s->ncd++] = e;
        else stale(s, e, e);
    } else if (c < s->cnamed) { /* to the end, among those to name */
        memmove(s->counted + c, s->counted + c + 1, sizeof(uint32_t) * (s->ncd - c - 1));
        s->counted[s->ncd - 1] = e;
        s->cnamed--;
    }
}

/* entries f..l (above M) added: merged with the runs they overlap or touch. 1 if anything
 * changed, 0 if they were acked already, -1 with MemoryError. O(log runs) to find the
 * place, O(the fewer runs before or after it) to move them when a run is inserted or
 * merged (those before move into the room before the first, when it has room). */
static int add_run(SmallState *s, uint32_t f, uint32_t l) {
    uint32_t n = s->n, i = f ? run_from(s, (unsigned long long)f - 1) : 0, j = i; /* touches f or after */
    while (j < n && run_first(s, j) <= (uint64_t)l + 1) j++;
    if (i == j) { /* a run of its own, at i (track reads no run of it: after the insert) */
        if (runs_splice(s, i, i, f, l) < 0) return -1;
        track(s, f, l, i, i);
        return 1;
    }
    if (j == i + 1 && run_first(s, i) <= f && l <= run_last(s, i)) return 0; /* inside one run */
    track(s, f, l, i, j); /* (before the merge: it reads the runs it merges) */
    runs_splice(s, i, j, run_first(s, i) < f ? run_first(s, i) : f, run_last(s, j - 1) > l ? run_last(s, j - 1) : l);
    return 1;
}

/* the first of the `n` pairs at `p` (entry, value), ascending by entry, whose entry is at or
 * after e (n when none) */
static uint32_t pair_from(const uint32_t *p, uint32_t n, unsigned long long e) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p[2 * mid] < e) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* the first count whose entry is at or after e (nc when none) */
static uint32_t count_from(SmallState *s, unsigned long long e) { return pair_from(s->counts, s->nc, e); }

/* the counts' room before the first (left by counts dropped near the front) */
static inline uint32_t count_head(const SmallState *s) { return (uint32_t)((s->counts - s->cbuf) / 2); }

/* the counts held: those not dropped in place */
static inline uint32_t counts_held(const SmallState *s) { return s->nc - s->cdead; }

static uint32_t count_cap = 1048576; /* cursor/small.py's COUNT_CAP: the most delivery counts and partial batches
                                        the form holds (_set_count_cap: tests lower it) */
static uint32_t count_moves_most = 64; /* the most counts an ack's drop moves (_set_count_moves: tests lower it) */
static uint32_t count_dead_most = 64;  /* the most counts dropped in place held whatever the counts (... and this) */

/* the counts dropped in place taken out: every count held again (what reads the counts whole
 * calls it first; the ack's own reads skip a count of 0). O(the counts from the lowest one
 * dropped in place) when some were: few where acks land near the top */
static void counts_tidy(SmallState *s) {
    if (!s->cdead) return;
    uint32_t k = s->cdead_lo, *c = s->counts;
    for (uint32_t i = k; i < s->nc; i++)
        if (c[2 * i + 1]) c[2 * k] = c[2 * i], c[2 * k + 1] = c[2 * i + 1], k++;
    s->nc = k, s->cdead = 0;
}

/* the counts of entries f..l go (they are acked): moving the fewer counts, those before them
 * (up, leaving their room before the first) or those after; or, when those are more than
 * count_moves_most and the entries a few, each dropped in place (its count 0: counts_tidy
 * takes them out once they are more than count_dead_most and an eighth of the counts).
 * O(log counts + the counts moved), amortized O(log counts) for an ack in the middle of many */
static void drop_counts(SmallState *s, unsigned long long f, unsigned long long l) {
    if (!s->nc) return;
    uint32_t i = count_from(s, f), j = count_from(s, l + 1), *c = s->counts;
    if (j <= i) return;
    uint32_t fewer = i < s->nc - j ? i : s->nc - j;
    if (fewer > count_moves_most && j - i <= 8) {
        if (!s->cdead || i < s->cdead_lo) s->cdead_lo = i;
        for (uint32_t k = i; k < j; k++)
            if (c[2 * k + 1]) c[2 * k + 1] = 0, s->cdead++;
        if (s->cdead > count_dead_most && s->cdead * 8 > s->nc) counts_tidy(s);
        return;
    }
    if (s->cdead) { /* (those after j move down j - i places; the lowest one dropped in place, if gone, at i or after) */
        for (uint32_t k = i; k < j; k++) s->cdead -= !c[2 * k + 1];
        s->cdead_lo = s->cdead_lo >= j ? s->cdead_lo - (j - i) : s->cdead_lo > i ? i : s->cdead_lo;
    }
    if (i < s->nc - j) {
        memmove(c + 2 * (j - i), c, sizeof(uint32_t) * 2 * i);
        s->counts += 2 * (j - i);
    } else
        memmove(c + 2 * i, c + 2 * j, sizeof(uint32_t) * 2 * (s->nc - j));
    s->nc -= j - i;
    while (s->cdead && !s->counts[1]) /* (the first count is one held: passed reads it as state in M's ledger) */
        s->counts += 2, s->nc--, s->cdead--, s->cdead_lo -= s->cdead_lo > 0;
}

/* a count `count` of entry `e` inserted at index `i` (count_from's for e; e not counted),
 * moving the fewer counts (those before it into the room before the first, when there is
 * some); -1 with MemoryError */
static int insert_count(SmallState *s, uint32_t i, long long e, long long count) {
    uint32_t head = count_head(s);
    if (head && i < s->nc - i) {
        s->counts -= 2;
        memmove(s->counts, s->counts + 2, sizeof(uint32_t) * 2 * i);
    } else {
        if (s->nc + 1 + head > s->croom) {
            memmove(s->cbuf, s->counts, sizeof(uint32_t) * 2 * s->nc); /* (the room before the first taken back) */
            s->counts = s->cbuf;
        }
        if (s->nc + 1 > s->croom) {
            uint32_t need = s->nc + 1, room = s->croom * 2 > need ? s->croom * 2 : (need > 8 ? need : 8);
            uint32_t *c = PyMem_Realloc(s->cbuf, sizeof(uint32_t) * 2 * room);
            if (c == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            s->counts = s->cbuf = c;
            s->croom = room;
        }
        memmove(s->counts + 2 * i + 2, s->counts + 2 * i, sizeof(uint32_t) * 2 * (s->nc - i));
    }
    s->counts[2 * i] = (uint32_t)e;
    s->counts[2 * i + 1] = (uint32_t)count;
    s->nc++;
    if (s->cdead && s->cdead_lo >= i) s->cdead_lo++; /* (those from i on moved up one place) */
    return 0;
}

/* the first partial batch whose entry is at or after e (nb when none) */
static uint32_t batch_from(SmallState *s, unsigned long long e) { return pair_from(s->bat, s->nb, e); }

/* the partial batches of entries f..l go (they are acked, or the form was reset) */
static void drop_batches(SmallState *s, unsigned long long f, unsigned long long l) {
    if (!s->nb) return;
    uint32_t i = batch_from(s, f), j = batch_from(s, l + 1);
    if (j <= i) return;
    for (uint32_t k = i; k < j; k++) Py_DECREF(s->bmask[k]);
    memmove(s->bat + 2 * i, s->bat + 2 * j, sizeof(uint32_t) * 2 * (s->nb - j));
    memmove(s->bmask + i, s->bmask + j, sizeof(PyObject *) * (s->nb - j));
    s->nb -= j - i;
}

/* a partial batch of `size` with `mask` (a new reference is taken) at entry `e`, inserted at
 * index `i` (batch_from's for e; e has none); -1 with MemoryError */
static int insert_batch(SmallState *s, uint32_t i, long long e, long size, PyObject *mask) {
    if (s->nb + 1 > s->broom) {
        uint32_t need = s->nb + 1, room = s->broom * 2 > need ? s->broom * 2 : (need > 4 ? need : 4);
        uint32_t *b = PyMem_Realloc(s->bat, sizeof(uint32_t) * 2 * room);
        if (b != NULL) s->bat = b;
        PyObject **m = b == NULL ? NULL : PyMem_Realloc(s->bmask, sizeof(PyObject *) * room);
        if (m == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->bmask = m;
        s->broom = room;
    }
    memmove(s->bat + 2 * i + 2, s->bat + 2 * i, sizeof(uint32_t) * 2 * (s->nb - i));
    memmove(s->bmask + i + 1, s->bmask + i, sizeof(PyObject *) * (s->nb - i));
    s->bat[2 * i] = (uint32_t)e;
    s->bat[2 * i + 1] = (uint32_t)size;
    s->bmask[i] = Py_NewRef(mask);
    s->nb++;
    return 0;
}

/* 1 when (size, mask) is a batch of `size` messages (1..MAX_BATCH_SIZE) with some of its
 * indexes acked in `mask`, not all of them (`whole`: all of them too); 0 when not; -1 with
 * an exception. *full: whether mask holds every index (when 1). small.py's _partial. */
static int partial_ok(PyObject *size_obj, PyObject *mask, int whole, int *full) {
    if (!PyLong_CheckExact(size_obj) || !PyLong_CheckExact(mask)) return 0;
    int overflow;
    long long size = PyLong_AsLongLongAndOverflow(size_obj, &overflow);
    if (overflow || size < 1 || size > MAX_BATCH_SIZE) return 0;
    PyObject *one = PyLong_FromLong(1), *zero = PyLong_FromLong(0);
    PyObject *shifted = one == NULL ? NULL : PyNumber_Lshift(one, size_obj);
    PyObject *all = shifted == NULL ? NULL : PyNumber_Subtract(shifted, one); /* every index: (1 << size) - 1 */
    int positive = all == NULL || zero == NULL ? -1 : PyObject_RichCompareBool(mask, zero, Py_GT);
    int within = positive <= 0 ? positive : PyObject_RichCompareBool(mask, all, Py_LE);
    *full = within <= 0 ? 0 : PyObject_RichCompareBool(mask, all, Py_EQ);
    Py_XDECREF(one);
    Py_XDECREF(zero);
    Py_XDECREF(shifted);
    Py_XDECREF(all);
    if (positive < 0 || within < 0 || *full < 0) return -1;
    return positive && within && (whole || !*full);
}

/* the index of the run holding e, or -1 */
static long long run_at(SmallState *s, unsigned long long e) {
    uint32_t i = run_from(s, e);
    return i < s->n && run_first(s, i) <= e ? (long long)i : -1;
}

/* the `*n` entries at `list` (the first `*named` of them named by a marker) moved `by` down the
 * line, those it moves below its start left out (small.py's _shifted) */
static void shift_entries(uint32_t *list, uint32_t *n, uint32_t *named, uint32_t by) {
    uint32_t m = 0, kept_named = 0;
    for (uint32_t i = 0; i < *n; i++) {
        if (list[i] < by) continue;
        kept_named += i < *named;
        list[m++] = list[i] - by;
    }
    *n = m, *named = kept_named;
}

/* M's ledger is sealed and M at (or past) its last entry: M moves on into the next spanned
 * ledger, which becomes M's ledger (the form's entries from its offset on become its own;
 * the others stay spanned), and on across those it is at or past the end of; the bound is
 * asked again. The chain's records of the ledgers after stand (their places on the line move
 * down), the new M's ledger's too while it holds state (passed); the next marker is a full one,
 * which no longer names those M left (small.py's _rebase) */
static void passed(SmallState *s);

static void rebase(SmallState *s) {
    uint32_t gone = 0;
    int left = 0; /* a record of a ledger M left */
    int chained = !s->fresh && s->rec != NULL, several = lg_count(&s->c.recs) > 1;
    if (!chained) unchain(s);
    while (s->ns && s->md_e >= (long long)s->span_o[0] - 1) {
        uint32_t b = s->span_o[0];
        s->md_l = s->span_l[0];
        s->md_e -= (long long)b;
        runs_shift(s, b); /* every run and count lies above M >= b - 1 */
        counts_tidy(s);   /* (one dropped in place may not) */
        for (uint32_t i = 0; i < s->nc; i++) s->counts[2 * i] -= b;
        for (uint32_t i = 0; i < s->nb; i++) s->bat[2 * i] -= b;
        s->rp_e -= (long long)b;
        if (s->rp_i) s->rp_i--;
        for (int k = 1; k < s->ns; k++) {
            s->span_l[k - 1] = s->span_l[k];
            s->span_o[k - 1] = s->span_o[k] - b;
        }
        s->ns--;
        s->limit -= (long long)b;
        gone += b;
        if (chained) {
            left |= lg_has(&s->c.recs, 0);
            lg_down(&s->c.recs), lg_down(&s->c.stale);
            memmove(s->rec, s->rec + 1, sizeof(long long) * (LINE_LEDGERS - 1));
            s->rec[LINE_LEDGERS - 1] = -1;
        }
    }
    if (chained && !lg_any(&s->c.recs)) { /* (no record left on the line: the next state is whole) */
        s->c.record = -1;
        unchain(s);
    }
    else if (chained) {
        if (several) { /* (rec[] names them; of one record, c.record is it, as it was) */
            s->c.record = -1;
            for (int k = 0; k < LINE_LEDGERS; k++)
                if (lg_has(&s->c.recs, k) && (s->c.record < 0 || s->rec[k] < s->c.record)) s->c.record = s->rec[k];
        }
        shift_entries(s->adds, &s->na, &s->named, gone);
        shift_entries(s->counted, &s->ncd, &s->cnamed, gone);
        if (left) s->c.deltas = s->every; /* (a full marker due: the next names the records that stand) */
        s->c.passed = s->dropped = 0; /* (the new M's ledger's record was written before M reached it, */
        s->low = -1;                   /* what it holds not known) */
        passed(s);
    }
    s->limit_version = -1;
    touch(s, 0);
}

/* M just moved on within its ledger (or into it: a rebase): while that ledger's record stands in
 * the chain and it holds state above M, the record stays named. While M is below everything the
 * chain holds of the ledger (low), the acks M passed go unnamed, as the parts' (dropped: a marker
 * counts the ranges above M). Once M reaches what the chain holds, c.passed: the record and the
 * acks since hold M's run from the M it was written at, tracked since, one range more than the
 * form above M; unless acks M passed went unnamed, and then the ledger's record is due (c.stale),
 * as it is when the ledger holds nothing (the next base drops it from the full marker).
 * small.py's _passed */
static void passed(SmallState *s) {
    unsigned long long end = line_end(s, 0);
    int holds = (s->n && run_first(s, 0) < end) || (s->nc && s->counts[0] < end) || (s->nb && s->bat[0] < end);
    if (s->fresh || !lg_has(&s->c.recs, 0) || !holds) lg_add(&s->c.stale, 0);
    else if (s->md_e < s->low) { /* (those named lie at or above low) */
        uint32_t k = s->named;
        for (uint32_t i = s->named; i < s->na; i++)
            if ((long long)s->adds[i] > s->md_e) s->adds[k++] = s->adds[i];
        if (k < s->na) s->na = k, s->dropped = 1;
    } else if (s->dropped) lg_add(&s->c.stale, 0);
    else s->c.passed = s->md_e >= 0;
}

/* a marker of the chain names the acks since its records from s->named on: the lowest of M's
 * ledger's is one the chain holds (low). small.py's _named_low */
static void named_low(SmallState *s) {
    unsigned long long end = line_end(s, 0);
    for (uint32_t i = s->named; i < s->na; i++)
        if (s->adds[i] < end && (long long)s->adds[i] < s->low) s->low = s->adds[i];
}

/* M moved over the first run when it starts at M + 1 (passed, or M's ledger due: passed()),
 * and on into the next ledger at the end of its own */
static void advance(SmallState *s) {
    if (s->n && run_first(s, 0) == (unsigned long long)(s->md_e + 1)) {
        s->md_e = run_last(s, 0);
        runs_drop_first(s);
        if (s->rp_e < s->md_e + 1) { /* the read position never below M + 1 */
            s->rp_e = s->md_e + 1;
            s->rp_i = 0;
        }
        passed(s);
    }
    if (s->ns && s->md_e >= (long long)s->span_o[0] - 1) rebase(s);
}

/* the runs across an offset of the line (each holds offset - 1 and offset: a range in each
 * ledger it touches) */
static uint32_t crossing(SmallState *s) {
    uint32_t out = 0, seen = 0;
    for (int k = 0; k < s->ns; k++) {
        uint32_t o = s->span_o[k];
        if (o <= seen) continue; /* (a ledger with no entries: its offset is the next one's) */
        seen = o;
        uint32_t i = run_from(s, o);
        out += i < s->n && run_first(s, i) < o;
    }
    return out;
}

static int is_acked(SmallState *s, long long e) { return e <= s->md_e || run_at(s, (unsigned long long)e) >= 0; }

/* entries f..l of the form acked: the part above M added, then M advanced. 0 or -1. */
static int ack_run(SmallState *s, long long f, long long l) {
    if (l <= s->md_e) return 0;
    if (f <= s->md_e) f = s->md_e + 1;
    int changed = add_run(s, (uint32_t)f, (uint32_t)l);
    if (changed < 0) return -1;
    if (changed) {
        uint32_t nb = s->nb;
        drop_counts(s, (unsigned long long)f, (unsigned long long)l); /* an acked entry has no count, */
        drop_batches(s, (unsigned long long)f, (unsigned long long)l);  /* ... no partial batch */
        if (s->nb != nb) unchain(s); /* (a partial batch gone: the chain's record still holds it) */
        touch(s, (unsigned long long)f);
        advance(s);
    }
    return 0;
}

/* whether the form's ranges, counted in each ledger as the parts count them (a run across an
 * offset is one in each ledger), are more than `most`; crossing(s) <= ns, so it is counted only
 * when runs and spans together pass `most` */
static int ranges_over(SmallState *s, unsigned long long most) {
    return s->n + (unsigned long long)s->ns > most && s->n + (unsigned long long)crossing(s) > most;
}

static int fitting(SmallState *s) { return !ranges_over(s, s->cap) && counts_held(s) + s->nb <= count_cap; }
static PyObject *fits(SmallState *s) { return PyBool_FromLong(fitting(s)); }

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
    s->runs = s->rbuf = s->own;
    s->room = OWN_RUNS;
    s->cursor_id = cid;
    s->md_l = md_l;
    s->md_e = md_e;
    s->rp_e = md_e + 1;
    s->limit_version = -1;
    s->next_seq = seq;
    s->slot = (uint8_t)slot;
    s->slots = (uint8_t)slots;
    s->cap = cap;
    s->c.base = s->c.marker = s->c.record = -1;
    s->fresh = 1;
    s->low = -1;
    s->every = 64;
    s->budget = -1;
    s->props = PyBytes_FromStringAndSize(NULL, 0);
    if (s->props == NULL || room_for(s, runs) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* a delivery count of `e` (not acked, above M) set to `count`; -1 with ValueError when e is
 * counted already or acked, or with MemoryError */
static int set_count(SmallState *s, long long e, long long count) {
    uint32_t i = count_from(s, (unsigned long long)e);
    int there = i < s->nc && s->counts[2 * i] == e; /* (held, or dropped in place) */
    if (e <= s->md_e || is_acked(s, e) || (there && s->counts[2 * i + 1]) || count < 1 || count > ENTRY_MAX) {
        PyErr_Format(PyExc_ValueError, "delivery count (%lld, %lld) is not of an unacked entry above M, once", e, count);
        return -1;
    }
    if (there) {
        s->counts[2 * i + 1] = (uint32_t)count, s->cdead--;
        return 0;
    }
    return insert_count(s, i, e, count);
}

/* a partial batch (size, mask) of `e` (not acked, above M, none there yet); -1 with ValueError
 * when it is not one, or with MemoryError */
static int set_batch(SmallState *s, long long e, PyObject *size, PyObject *mask) {
    uint32_t i = batch_from(s, (unsigned long long)e);
    int full = 0, ok = partial_ok(size, mask, 0, &full);
    if (ok < 0) return -1;
    if (!ok || e <= s->md_e || is_acked(s, e) || (i < s->nb && s->bat[2 * i] == e)) {
        PyErr_Format(PyExc_ValueError, "partial batch (%lld, %S, %S) is not of an unacked entry above M, once", e, size,
                     mask);
        return -1;
    }
    return insert_batch(s, i, e, PyLong_AsLong(size), mask);
}

/* SmallState(cursor_id, md_l, md_e, next_seq, slot, slots, runs, cap, counts=(), rp_e=-1, props=b"", rp_i=0,
 * batches=()) */
static PyObject *SmallState_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    unsigned long long cid, seq;
    long long md_l, md_e, rp_e = -1;
    int slot, slots, rp_i = 0;
    unsigned int cap;
    PyObject *runs, *counts = NULL, *rp_obj = NULL, *props = NULL, *batches = NULL;
    static char *names[] = {"cursor_id", "md_l", "md_e", "next_seq", "slot", "slots", "runs", "cap", "counts", "rp_e",
                            "props", "rp_i", "batches", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KLLKiiOI|OOSiO", names, &cid, &md_l, &md_e, &seq, &slot, &slots, &runs,
                                     &cap, &counts, &rp_obj, &props, &rp_i, &batches))
        return NULL;
    if (md_l < 0 || md_e < -1 || md_e >= 0xFFFFFFFFLL || slot < 0 || slot > 1 || slots < 0 || slots > 3 || rp_i < 0 ||
        rp_i > SPAN_MOST) {
        PyErr_SetString(PyExc_ValueError, "a small state's position, slot or slots are outside the layout");
        return NULL;
    }
    int flat = PyBytes_Check(runs); /* line_runs' bytes: the bounds as native u32s */
    if (flat && PyBytes_GET_SIZE(runs) % 8) {
        PyErr_Format(PyExc_ValueError, "runs of %zd bytes are not (first, last) pairs of u32s", PyBytes_GET_SIZE(runs));
        return NULL;
    }
    PyObject *seq_obj = flat ? Py_NewRef(runs) : PySequence_Fast(runs, "runs are a sequence of (first, last)");
    if (seq_obj == NULL) return NULL;
    Py_ssize_t m = flat ? PyBytes_GET_SIZE(runs) / 8 : PySequence_Fast_GET_SIZE(seq_obj);
    PyObject *cseq = NULL, *bseq = NULL;
    SmallState *s = small_new(type, cid, md_l, md_e, seq, slot, slots, cap, (uint32_t)m);
    if (s == NULL) {
        Py_DECREF(seq_obj);
        return NULL;
    }
    long long at = md_e + 2; /* a run starts above M + 1, each a gap after the one before */
    uint32_t *area = runs_area(s, (uint32_t)m); /* (room made by small_new) */
    for (Py_ssize_t i = 0; i < m; i++) {
        long long f, l;
        if (flat) {
            uint32_t pair[2];
            memcpy(pair, PyBytes_AS_STRING(runs) + 8 * i, 8);
            f = pair[0], l = pair[1];
        } else {
            PyObject *t = PySequence_Fast_GET_ITEM(seq_obj, i);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
                PyErr_SetString(PyExc_TypeError, "a run is a (first, last) tuple");
                goto fail;
            }
            if (entry_of(PyTuple_GET_ITEM(t, 0), "first", &f) < 0 || entry_of(PyTuple_GET_ITEM(t, 1), "last", &l) < 0)
                goto fail;
        }
        if (f < at || l < f) {
            PyErr_Format(PyExc_ValueError, "run (%lld, %lld) is not above M + 1 and the run before, with a gap", f, l);
            goto fail;
        }
        area[2 * i] = (uint32_t)f;
        area[2 * i + 1] = (uint32_t)l;
        at = l + 2;
    }
    if (runs_took(s, (uint32_t)m) < 0) goto fail;
    s->persisted = (uint32_t)m;
    if (rp_obj != NULL) {
        rp_e = PyLong_AsLongLong(rp_obj);
        if (rp_e == -1 && PyErr_Occurred()) goto fail;
        if (rp_e != -1) { /* -1: M + 1 */
            if (entry_of(rp_obj, "rp_e", &rp_e) < 0) goto fail;
            if (rp_e <= md_e) {
                PyErr_Format(PyExc_ValueError, "read position %lld is at or below M %lld", rp_e, md_e);
                goto fail;
            }
            s->rp_e = rp_e;
        }
    }
    if (counts != NULL) {
        if ((cseq = PySequence_Fast(counts, "counts are a sequence of (entry, count)")) == NULL) goto fail;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(cseq); i++) {
            PyObject *t = PySequence_Fast_GET_ITEM(cseq, i);
            long long e, c;
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
                PyErr_SetString(PyExc_TypeError, "a delivery count is an (entry, count) tuple");
                goto fail;
            }
            if (entry_of(PyTuple_GET_ITEM(t, 0), "a counted entry", &e) < 0) goto fail;
            c = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1));
            if (c == -1 && PyErr_Occurred()) goto fail;
            if (set_count(s, e, c) < 0) goto fail;
        }
    }
    if (batches != NULL) {
        if ((bseq = PySequence_Fast(batches, "partial batches are a sequence of (entry, size, mask)")) == NULL) goto fail;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(bseq); i++) {
            PyObject *t = PySequence_Fast_GET_ITEM(bseq, i);
            long long e;
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
                PyErr_SetString(PyExc_TypeError, "a partial batch is an (entry, size, mask) tuple");
                goto fail;
            }
            if (entry_of(PyTuple_GET_ITEM(t, 0), "a batch's entry", &e) < 0) goto fail;
            if (set_batch(s, e, PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2)) < 0) goto fail;
        }
    }
    if (counts_held(s) + s->nb > count_cap) {
        PyErr_Format(PyExc_ValueError, "%u delivery counts and %u partial batches: the form holds at most %d",
                     counts_held(s), s->nb, count_cap);
        goto fail;
    }
    if (props != NULL) Py_SETREF(s->props, Py_NewRef(props));
    s->rp_i = (uint8_t)rp_i; /* (the ledger of the line the read position is in: the spans bound() gives say which) */
    Py_XDECREF(cseq);
    Py_XDECREF(bseq);
    Py_DECREF(seq_obj);
    return (PyObject *)s;
fail:
    Py_XDECREF(cseq);
    Py_XDECREF(bseq);
    Py_DECREF(seq_obj);
    Py_DECREF(s);
    return NULL;
}

static void SmallState_dealloc(SmallState *s) {
    Py_XDECREF(s->props);
    Py_XDECREF(s->cut_record);
    Py_XDECREF(s->unread);
    for (uint32_t i = 0; i < s->nb; i++) Py_DECREF(s->bmask[i]);
    PyMem_Free(s->bat);
    PyMem_Free(s->bmask);
    if (s->rbuf != s->own) PyMem_Free(s->rbuf);
    chunks_free(s);
    PyMem_Free(s->cbuf);
    PyMem_Free(s->span_l);
    PyMem_Free(s->span_o);
    PyMem_Free(s->adds);
    PyMem_Free(s->rec);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* ack_range(first, last) -> bool: entries first..last of the form acked; whether the runs
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

/* acked(entry) -> bool: whether entry of the form is acked (at or below M, or in a run) */
static PyObject *SmallState_acked(SmallState *s, PyObject *arg) {
    long long e = PyLong_AsLongLong(arg);
    if (e == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    return PyBool_FromLong(is_acked(s, e));
}

/* the form's highest entry of the j-th ledger of its line (0: M's): the entry before the
 * next one's offset, or the bound for the last */
static long long top_of(SmallState *s, int j) { return j < s->ns ? (long long)s->span_o[j] - 1 : s->limit; }

static long long offset_of(SmallState *s, long long l, int *j); /* (below) */
static int over_budget(SmallState *s);

/* ack_entries(ledger, bitmap) -> bool | None: Cursor.ack_entries of a BitMap in the form:
 * None, changing nothing, unless `ledger` is on the line (M's or a spanned one), every
 * entry lies in its part of the line (below the next ledger's offset, or within the bound)
 * and the BitMap holds at most the form's cap of runs (more: a bulk ack, the parts'); else
 * whether the state still fits the cap and its cursor's cache budget (an empty BitMap
 * changes nothing). O(its runs x runs). */
static PyObject *SmallState_ack_entries(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "ack_entries(ledger, bitmap)");
        return NULL;
    }
    int over = 0, j;
    long long l = PyLong_AsLongLongAndOverflow(args[0], &over);
    if (l == -1 && PyErr_Occurred()) return NULL;
    long long o = over ? -1 : offset_of(s, l, &j);
    if (o < 0) Py_RETURN_NONE;
    uint32_t *fs, *ls;
    Py_ssize_t m = bitmap_runs(args[1], &fs, &ls);
    if (m < 0) return NULL;
    int rc = 0, taken = m == 0 || (m <= (Py_ssize_t)s->cap && o + (long long)ls[m - 1] <= top_of(s, j));
    for (Py_ssize_t k = 0; taken && k < m && rc == 0; k++) rc = ack_run(s, o + fs[k], o + ls[k]);
    PyMem_Free(fs);
    PyMem_Free(ls);
    if (rc < 0) return NULL;
    if (!taken) Py_RETURN_NONE;
    return PyBool_FromLong(fitting(s) && !over_budget(s));
}

/* the line's offset of ledger l (0: M's), or -1 when it is not on the line (the spanned
 * ledgers ascend, as the directory's ids). O(log spans) */
static long long offset_of(SmallState *s, long long l, int *j) {
    if (l == s->md_l) {
        *j = 0;
        return 0;
    }
    int lo = 0, hi = s->ns;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->span_l[mid] < l) lo = mid + 1;
        else hi = mid;
    }
    if (lo == s->ns || s->span_l[lo] != l) return -1;
    *j = lo + 1;
    return s->span_o[lo];
}

/* the form's entry of position (l, e), or -1 when it is not one the form takes: in M's
 * ledger or a spanned one, at most its last on the line and the bound */
static long long form_entry(SmallState *s, long long l, long long e) {
    int j;
    long long o = offset_of(s, l, &j);
    if (e < 0 || e > ENTRY_MAX || o < 0) return -1;
    return o + e <= top_of(s, j) ? o + e : -1;
}

/* the form's entry of a 2-tuple of ints, -1 as form_entry, or for anything else */
static long long item_entry_of(SmallState *s, PyObject *t, long long *lv, long long *ev) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) return -1;
    PyObject *l = PyTuple_GET_ITEM(t, 0), *e = PyTuple_GET_ITEM(t, 1);
    if (!PyLong_CheckExact(l) || !PyLong_CheckExact(e)) return -1;
    int ol, oe;
    *lv = PyLong_AsLongLongAndOverflow(l, &ol), *ev = PyLong_AsLongLongAndOverflow(e, &oe);
    return ol || oe ? -1 : form_entry(s, *lv, *ev);
}

static long long item_entry(SmallState *s, PyObject *t) {
    long long l, e;
    return item_entry_of(s, t, &l, &e);
}

/* the positions of a list ack_items keeps as it checks them, so that it reads each one once */
#define ACK_HELD 256

/* Cursor.ack of a list (or tuple) of positions, each a 2-tuple of ints the form takes
 * (form_entry, within the bound bound() gave): each acked, in order; 1 done, 0 declined
 * having changed nothing (another kind of items, or one the form does not take), -1 with
 * an exception */
static int ack_items(SmallState *s, PyObject *items) {
    if (!PyList_Check(items) && !PyTuple_Check(items)) return 0;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(items);
    PyObject **at = PySequence_Fast_ITEMS(items);
    long long held[2 * ACK_HELD], l, e;
    for (Py_ssize_t i = 0; i < k; i++) { /* every one checked first: one the form does not take, none acked */
        if (item_entry_of(s, at[i], &l, &e) < 0) return 0;
        if (i < ACK_HELD) held[2 * i] = l, held[2 * i + 1] = e;
    }
    /* Each position's entry on the line, as the line stands after the acks before it: the
     * positions that follow one another (a read's, mostly all of them) acked as one run,
     * which is what acking them one by one does. A run is acked before the next position's
     * entry is taken, whose offset the run's ack may have moved (M moved on into the next
     * ledger: the line begins there). */
    long long first = -1, last = -2;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (i < ACK_HELD) l = held[2 * i], e = held[2 * i + 1];
        else l = PyLong_AsLongLong(PyTuple_GET_ITEM(at[i], 0)), e = PyLong_AsLongLong(PyTuple_GET_ITEM(at[i], 1));
        int j;
        long long o = offset_of(s, l, &j);
        if (o >= 0 && o + e == last + 1) {
            last++;
            continue;
        }
        if (first >= 0) {
            if (ack_run(s, first, last) < 0) return -1;
            o = offset_of(s, l, &j);
        }
        first = o < 0 ? -1 : o + e, last = first < 0 ? -2 : first; /* (o < 0: M moved on past its ledger) */
    }
    return first < 0 ? 1 : ack_run(s, first, last) < 0 ? -1 : 1;
}

/* ack_positions(items) -> bool | None: ack_items, and whether the state still fits; None,
 * changing nothing, when it declined */
static PyObject *SmallState_ack_positions(SmallState *s, PyObject *items) {
    int r = ack_items(s, items);
    if (r < 0) return NULL;
    if (r == 0) Py_RETURN_NONE;
    return fits(s);
}

/* one more delivery of each position of `items` (a list or tuple of 2-tuples of ints the form
 * takes: item_entry, as ack_positions), or, with `values` (a list of as many ints, each
 * 1..ENTRY_MAX), each one's count set to its value; each one's count after it, 0 for an acked
 * one (not counted); None, changing nothing, when one is not the form's (the parts count
 * them) */
static PyObject *deliver(SmallState *s, PyObject *items, PyObject *values) {
    if (!PyList_Check(items) && !PyTuple_Check(items)) Py_RETURN_NONE;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(items);
    PyObject **at = PySequence_Fast_ITEMS(items);
    if (values != NULL) {
        if (!PyList_Check(values) || PyList_GET_SIZE(values) != k) {
            PyErr_SetString(PyExc_TypeError, "set_counts(items, values): values is a list of as many counts");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            long long n = PyLong_Check(PyList_GET_ITEM(values, i)) ? PyLong_AsLongLong(PyList_GET_ITEM(values, i)) : -1;
            if (n == -1 && PyErr_Occurred()) PyErr_Clear();
            if (n < 1 || n > ENTRY_MAX) {
                PyErr_Format(PyExc_ValueError, "delivery count %R is not allowed: allowed 1..2**32-1",
                             PyList_GET_ITEM(values, i));
                return NULL;
            }
        }
    }
    long long held[ACK_HELD];
    for (Py_ssize_t i = 0; i < k; i++) { /* every one checked first: one the form does not take, none counted */
        long long x = item_entry(s, at[i]);
        if (x < 0) Py_RETURN_NONE;
        if (i < ACK_HELD) held[i] = x;
    }
    PyObject *out = PyList_New(k);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) { /* (a delivery moves no offset: each entry is as checked) */
        long long e = i < ACK_HELD ? held[i] : item_entry(s, at[i]), n = 0;
        if (!is_acked(s, e)) {
            long long set = values == NULL ? 0 : PyLong_AsLongLong(PyList_GET_ITEM(values, i));
            uint32_t j = count_from(s, (unsigned long long)e);
            if (j < s->nc && s->counts[2 * j] == e && s->counts[2 * j + 1]) {
                if (set) s->counts[2 * j + 1] = (uint32_t)set;
                else {
                    if (s->counts[2 * j + 1] < ENTRY_MAX) s->counts[2 * j + 1]++;
                    s->redeliveries++;
                }
            } else if (j < s->nc && s->counts[2 * j] == e) { /* (dropped in place: counted again) */
                s->counts[2 * j + 1] = set ? (uint32_t)set : 1, s->cdead--;
            } else if (insert_count(s, j, e, set ? set : 1) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            n = s->counts[2 * j + 1];
            touch(s, (unsigned long long)e);
            if (!s->fresh) count_since(s, (uint32_t)e);
        }
        PyObject *v = PyLong_FromLongLong(n);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* deliver_positions(items) -> [count, ...] | None: deliver, one more delivery of each */
static PyObject *SmallState_deliver_positions(SmallState *s, PyObject *items) {
    return deliver(s, items, NULL);
}

/* set_counts(items, values) -> [count, ...] | None: deliver, each count set to its value
 * (Cursor.restore_delivery_counts) */
static PyObject *SmallState_set_counts(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_counts(items, values)");
        return NULL;
    }
    return deliver(s, args[0], args[1]);
}

/* count(entry) -> int: entry's delivery count (0: none, or acked) */
static PyObject *SmallState_count(SmallState *s, PyObject *arg) {
    if (!PyLong_Check(arg)) return PyLong_FromLong(0);
    int overflow;
    long long e = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (e == -1 && PyErr_Occurred()) return NULL;
    if (overflow || e < 0 || e > ENTRY_MAX) return PyLong_FromLong(0);
    uint32_t j = count_from(s, (unsigned long long)e);
    return PyLong_FromUnsignedLong(j < s->nc && s->counts[2 * j] == e ? s->counts[2 * j + 1] : 0);
}

/* batches() -> [(entry, size, mask), ...] ascending */
static PyObject *SmallState_batches(SmallState *s, PyObject *unused) {
    PyObject *out = PyList_New(s->nb);
    for (uint32_t i = 0; out != NULL && i < s->nb; i++) {
        PyObject *t = Py_BuildValue("(IIO)", s->bat[2 * i], s->bat[2 * i + 1], s->bmask[i]);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* batch(entry) -> (size, mask) | None: entry's partial batch */
static PyObject *SmallState_batch(SmallState *s, PyObject *arg) {
    if (!PyLong_Check(arg)) Py_RETURN_NONE;
    int overflow;
    long long e = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (e == -1 && PyErr_Occurred()) return NULL;
    if (overflow || e < 0 || e > ENTRY_MAX) Py_RETURN_NONE;
    uint32_t i = batch_from(s, (unsigned long long)e);
    if (i < s->nb && s->bat[2 * i] == e) return Py_BuildValue("(IO)", s->bat[2 * i + 1], s->bmask[i]);
    Py_RETURN_NONE;
}

/* ack_batch(entry, size, mask) -> bool: indexes `mask` of the batch of `size` messages at the
 * form's `entry` acked (the caller checked them, and the size of a batch recorded there):
 * with those recorded before, the entry is acked once every index is; an acked entry
 * changes nothing. Whether the state still fits. */
static PyObject *SmallState_ack_batch(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "ack_batch(entry, size, mask)");
        return NULL;
    }
    long long e;
    if (entry_of(args[0], "entry", &e) < 0) return NULL;
    int full = 0, ok = partial_ok(args[1], args[2], 1, &full);
    if (ok < 0) return NULL;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "batch mask %S of size %S is outside the layout", args[2], args[1]);
        return NULL;
    }
    if (is_acked(s, e)) return fits(s);
    long size = PyLong_AsLong(args[1]);
    uint32_t i = batch_from(s, (unsigned long long)e);
    int has = i < s->nb && s->bat[2 * i] == e;
    PyObject *mask = Py_NewRef(args[2]);
    if (has) {
        if ((long)s->bat[2 * i + 1] != size) {
            PyErr_Format(PyExc_ValueError, "batch size %ld is not the %u recorded at entry %lld", size,
                         s->bat[2 * i + 1], e);
            Py_DECREF(mask);
            return NULL;
        }
        Py_SETREF(mask, PyNumber_Or(mask, s->bmask[i]));
        if (mask == NULL) return NULL;
        if (partial_ok(args[1], mask, 1, &full) < 0) {
            Py_DECREF(mask);
            return NULL;
        }
    }
    int rc = 0;
    if (full) {
        rc = ack_run(s, e, e); /* (its partial batch goes with the ack) */
    } else if (!has) {
        rc = insert_batch(s, i, e, size, mask);
        touch(s, (unsigned long long)e);
        unchain(s);
    } else {
        int same = PyObject_RichCompareBool(mask, s->bmask[i], Py_EQ);
        if (same < 0) rc = -1;
        else if (!same) {
            Py_SETREF(s->bmask[i], Py_NewRef(mask));
            touch(s, (unsigned long long)e);
            unchain(s);
        }
    }
    Py_DECREF(mask);
    if (rc < 0) return NULL;
    return fits(s);
}

/* [(p[0], p[1]), (p[2], p[3]), ...]: `n` pairs of u32 */
static PyObject *pair_list(const uint32_t *p, uint32_t n) {
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(II)", p[2 * i], p[2 * i + 1]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* counts(first=0, stop=2**32) -> [(entry, count), ...] ascending, of the entries first..stop - 1:
 * O(log counts + those) */
static PyObject *SmallState_counts(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    long long first = 0, stop = ENTRY_MAX + 1;
    if (nargs != 0 && nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "counts(first=0, stop=2**32) takes no argument or two");
        return NULL;
    }
    if (nargs == 2 && (ranged_arg(args[0], "first", 0, ENTRY_MAX + 1, &first) < 0 ||
                       ranged_arg(args[1], "stop", 0, ENTRY_MAX + 1, &stop) < 0))
        return NULL;
    counts_tidy(s);
    uint32_t i = count_from(s, (unsigned long long)first), j = stop > first ? count_from(s, (unsigned long long)stop) : i;
    return pair_list(s->counts + 2 * i, j - i);
}

static PyObject *SmallState_fits(SmallState *s, PyObject *unused) { return fits(s); }

/* the form's highest entry holding state (its last run's end, its highest delivery count's or
 * partial batch's entry, else M) */
static long long top_entry(SmallState *s) {
    long long top = s->md_e;
    if (s->unread != NULL && s->unread_top > top) top = s->unread_top; /* (its record's, read lazily) */
    else if (s->n && (long long)run_last(s, s->n - 1) > top) top = run_last(s, s->n - 1);
    if (s->nc && (long long)s->counts[2 * s->nc - 2] > top) top = s->counts[2 * s->nc - 2];
    if (s->nb && (long long)s->bat[2 * s->nb - 2] > top) top = s->bat[2 * s->nb - 2];
    return top;
}

/* top() -> int: top_entry */
static PyObject *SmallState_top(SmallState *s, PyObject *unused) { return PyLong_FromLongLong(top_entry(s)); }

/* bound(version, spans, limit) -> bool: as of the topic's directory at `version`, the
 * ledgers after M's on the form's line, ((ledger, offset), ...) (ledgers ascending after M's,
 * offsets ascending or equal, those spanned already as they were), and the form's entries go
 * up to `limit`. True when M moved on into the next ledger (it was at its offset - 1): the
 * caller asks again for the new M's ledger. */
static PyObject *SmallState_bound(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bound(version, spans: tuple, limit)");
        return NULL;
    }
    long long version = PyLong_AsLongLong(args[0]), limit = PyLong_AsLongLong(args[2]);
    if ((version == -1 || limit == -1) && PyErr_Occurred()) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(args[1]);
    long long ls[SPAN_MOST], os[SPAN_MOST], last_l = s->md_l, last_o = 0;
    int ok = PyLong_CheckExact(args[2]) && k <= SPAN_MOST && limit >= -1 && limit <= ENTRY_MAX;
    for (Py_ssize_t i = 0; ok && i < k; i++) {
        PyObject *p = PyTuple_GET_ITEM(args[1], i);
        int ol = 1, oo = 1;
        ok = PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(p, 0)) &&
             PyLong_CheckExact(PyTuple_GET_ITEM(p, 1));
        if (ok) {
            ls[i] = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(p, 0), &ol);
            os[i] = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(p, 1), &oo);
        }
        ok = ok && !ol && !oo && ls[i] > last_l && last_o <= os[i] && os[i] <= ENTRY_MAX &&
             (i >= s->ns || s->span_o[i] == os[i]);
        if (ok) last_l = ls[i], last_o = os[i];
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "bound(%lld, %R, %R) does not fit a form at (%lld, %lld)", version, args[1],
                     args[2], s->md_l, s->md_e);
        return NULL;
    }
    if (k > s->span_room) { /* (each array grown alone: one that failed leaves the other as it was) */
        long long *l = PyMem_Realloc(s->span_l, sizeof(long long) * (size_t)k);
        if (l != NULL) s->span_l = l;
        uint32_t *o = l == NULL ? NULL : PyMem_Realloc(s->span_o, sizeof(uint32_t) * (size_t)k);
        if (o == NULL) return PyErr_NoMemory();
        s->span_o = o;
        s->span_room = (uint8_t)k;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        s->span_l[i] = ls[i];
        s->span_o[i] = (uint32_t)os[i];
    }
    s->ns = (uint8_t)k;
    s->limit = limit;
    s->limit_version = version;
    if (s->ns && s->md_e >= (long long)s->span_o[0] - 1) {
        if (s->unread != NULL && read_unread(s) < 0) return NULL;
        rebase(s);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* spans -> ((ledger, offset), ...): the ledgers after M's on the form's line */
static PyObject *SmallState_spans(SmallState *s, void *unused) {
    PyObject *out = PyTuple_New(s->ns);
    for (int k = 0; out != NULL && k < s->ns; k++) {
        PyObject *pair = Py_BuildValue("(LI)", s->span_l[k], (unsigned int)s->span_o[k]);
        if (pair == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, k, pair);
    }
    return out;
}

/* small_ack (_native.h says what it returns): one position, or a list of them, in the form,
 * from _ack.c's compiled Cursor.ack */
int small_ack(PyObject *small, PyObject *pos, int one, long long version, PyObject *listed, PyObject *core) {
    if (Py_TYPE(small) != &SmallStateType || !PyDict_CheckExact(listed)) return 0;
    SmallState *s = (SmallState *)small;
    if (s->ended || s->limit_version < 0 || s->limit_version != version) return 0;
    if (s->unread != NULL && read_unread(s) < 0) return -1;
    int was_dirty = s->dirty;
    if (one) {
        long long x = item_entry(s, pos);
        if (x < 0) return 0;
        if (ack_run(s, x, x) < 0) return -1;
    } else {
        int r = ack_items(s, pos);
        if (r <= 0) return r;
    }
    if (s->dirty && !was_dirty && PyDict_SetItem(listed, small, core) < 0) return -1; /* changed: listed */
    if (!fitting(s)) return 3;
    return s->limit_version < 0 ? 4 : 1;
}

/* read_from(entry): a sequential read moved on to the form's entry (never backwards),
 * hopping a run of acks that starts there; from a spanned ledger's offset on it is in that
 * ledger (a sealed ledger's end is the next one's first entry) */
static PyObject *SmallState_read_from(SmallState *s, PyObject *arg) {
    long long e;
    if (entry_of(arg, "entry", &e) < 0) return NULL;
    long long i = run_at(s, (unsigned long long)e);
    if (i >= 0) e = (long long)run_last(s, (uint32_t)i) + 1;
    int at = line_index(s, (unsigned long long)e);
    if (e > s->rp_e || (e == s->rp_e && at > s->rp_i)) {
        s->rp_e = e;
        s->rp_i = (uint8_t)at;
    }
    Py_RETURN_NONE;
}

/* rewind(): read again from M + 1 */
static PyObject *SmallState_rewind(SmallState *s, PyObject *unused) {
    s->rp_e = s->md_e + 1;
    s->rp_i = 0;
    Py_RETURN_NONE;
}

/* the entries of `seq` (a sequence or iterable of ints, each an entry of the layout) into `out`
 * (room for `room`): how many; -1 with an exception when more, or not entries */
static Py_ssize_t entries_into(PyObject *seq, uint32_t *out, Py_ssize_t room, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > room) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: more than the chain names (%zd)", what, room);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long e;
        if (entry_of(PySequence_Fast_GET_ITEM(fast, i), what, &e) < 0) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (uint32_t)e;
    }
    Py_DECREF(fast);
    return n;
}

/* the records adopt is given, into rec (-1 elsewhere) and *recs: ((k, seq), ...), the line's k-th
 * ledger's (k below `line`, each once, seq in 0..below-1), or an int, M's ledger's alone (-1: none);
 * -1 (with an exception for what is not an int or such pairs) when they are not */
static int records_into(PyObject *arg, long long *rec, Ledgers *recs, int line, long long below) {
    for (int k = 0; k < LINE_LEDGERS; k++) rec[k] = -1;
    memset(recs, 0, sizeof(*recs));
    if (PyLong_Check(arg)) {
        long long r = PyLong_AsLongLong(arg);
        if (r == -1 && PyErr_Occurred()) return -1;
        if (r < -1 || r >= below) return -1;
        if (r >= 0) rec[0] = r, lg_add(recs, 0);
        return 0;
    }
    PyObject *fast = PySequence_Fast(arg, "adopt's records are ((k, seq), ...) or an int");
    if (fast == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, i);
        long long k, seq;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyLong_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyLong_Check(PyTuple_GET_ITEM(pair, 1))) {
            rc = -1;
            break;
        }
        if ((k = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0))) == -1 && PyErr_Occurred()) PyErr_Clear(), k = -2;
        if ((seq = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1))) == -1 && PyErr_Occurred()) PyErr_Clear(), seq = -2;
        if (k == 0 && seq == -1) continue; /* (M's ledger: none) */
        if (k < 0 || k >= line || seq < 0 || seq >= below || lg_has(recs, (int)k)) rc = -1;
        else rec[k] = seq, lg_add(recs, (int)k);
    }
    Py_DECREF(fast);
    return rc;
}

/* adopt(base, marker, records, base_bytes, adds=(), counted=(), deltas=0, chain_bytes=0): the chain
 * its parts wrote last, full marker `base` of `base_bytes` and `deltas` delta markers of
 * `chain_bytes` after it up to `marker` (`base` when none), naming the records `records`
 * (((k, seq), ...): the line's k-th ledger's; or M's ledger's alone, an int, -1:
 * none) with the entries (the form's) acked since them `adds` and those counted since `counted`:
 * the next states are markers naming those records (small.py's _adopt) */
static PyObject *SmallState_adopt(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    long long base, marker, bytes, deltas = 0, chain_bytes = 0;
    if (nargs < 4 || nargs > 8) {
        PyErr_SetString(PyExc_TypeError,
                        "adopt(base, marker, records, base_bytes, adds=(), counted=(), deltas=0, chain_bytes=0)");
        return NULL;
    }
    if (nargs > 6 && (deltas = PyLong_AsLongLong(args[6])) == -1 && PyErr_Occurred()) return NULL;
    if (nargs > 7 && (chain_bytes = PyLong_AsLongLong(args[7])) == -1 && PyErr_Occurred()) return NULL;
    if ((base = PyLong_AsLongLong(args[0])) == -1 && PyErr_Occurred()) return NULL;
    if ((marker = PyLong_AsLongLong(args[1])) == -1 && PyErr_Occurred()) return NULL;
    if ((bytes = PyLong_AsLongLong(args[3])) == -1 && PyErr_Occurred()) return NULL;
    uint32_t adds[DELTA_MOST], counted[DELTA_MOST];
    Py_ssize_t na = nargs > 4 ? entries_into(args[4], adds, DELTA_MOST, "an entry acked since") : 0;
    if (na < 0) return NULL;
    Py_ssize_t nc = nargs > 5 ? entries_into(args[5], counted, DELTA_MOST, "a counted entry") : 0;
    if (nc < 0) return NULL;
    long long next = (long long)s->next_seq, rec[LINE_LEDGERS];
    Ledgers recs;
    int line = s->ns + 1;
    int bad_records = records_into(args[2], rec, &recs, line, marker < 0 ? 0 : marker) < 0;
    if (bad_records && PyErr_Occurred()) return NULL;
    for (int k = 0; !bad_records && k < LINE_LEDGERS; k++) /* (a delta marker may name records after the full one) */
        bad_records = lg_has(&recs, k) && rec[k] == base;
    if (bad_records || base < 0 || marker < base || marker >= next || (deltas == 0) != (marker == base) ||
        s->c.base != -2 || bytes < 0 || deltas < 0 || deltas > (long long)U32 || chain_bytes < 0 ||
        na + nc > DELTA_MOST) {
        PyErr_Format(PyExc_ValueError, "adopt(%lld, %lld, %R): not a chain before %lld of its parts", base, marker,
                     args[2], next);
        return NULL;
    }
    if (rec_room(s) < 0) return NULL;
    memcpy(s->rec, rec, sizeof(rec));
    s->c.record = -1;
    for (int k = 0; k < LINE_LEDGERS; k++)
        if (lg_has(&recs, k) && (s->c.record < 0 || rec[k] < s->c.record)) s->c.record = rec[k];
    s->c.base = base, s->c.marker = marker, s->c.recs = recs;
    memset(&s->c.stale, 0, sizeof(Ledgers));
    s->c.base_bytes = (unsigned long long)bytes;
    s->c.deltas = (uint32_t)deltas, s->c.chain_bytes = (unsigned long long)chain_bytes, s->c.untrimmed = 0;
    unchain(s);
    if (lg_any(&recs)) {
        rechain(s);
        s->low = s->unread != NULL ? LOW_LATER : held_low(s); /* (what they hold: above M) */
        if (!s->fresh) {
            memcpy(s->adds, adds, sizeof(uint32_t) * na), memcpy(s->counted, counted, sizeof(uint32_t) * nc);
            s->na = s->named = (uint32_t)na, s->ncd = s->cnamed = (uint32_t)nc;
        }
    }
    Py_RETURN_NONE;
}

/* the chain's records as a tuple (none while it has no record): what a trim below its full
 * marker keeps (small.py's _records) */
static PyObject *records_of(Chain *c, const long long *rec) {
    int m = c->record >= 0 && rec != NULL ? lg_count(&c->recs) : 0;
    PyObject *t = PyTuple_New(m);
    for (int k = 0, i = 0; t != NULL && i < m; k++) {
        if (!lg_has(&c->recs, k)) continue;
        PyObject *v = PyLong_FromLongLong(rec[k]);
        if (v == NULL) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i++, v);
    }
    return t;
}

/* records() -> tuple: the chain's records, in the line's order (PySmallState.records) */
static PyObject *SmallState_records(SmallState *s, PyObject *unused) {
    (void)unused;
    return records_of(&s->c, s->rec);
}

/* room for the chain's records (and their copy); -1 with MemoryError */
static int rec_room(SmallState *s) {
    if (s->rec == NULL && (s->rec = PyMem_Malloc(sizeof(long long) * 2 * LINE_LEDGERS)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* the ledgers of the line a new base of s's chain writes a record of (small.py's _to_record) */
static Ledgers to_record(SmallState *s, uint32_t max_acks) {
    Ledgers held = held_of(s);
    if (s->fresh || s->c.base < 0 || !lg_any(&s->c.recs) || s->rec == NULL) return held;
    Ledgers due = lg_or(lg_minus(held, &s->c.recs), &s->c.stale);
    if (over_acks(s, max_acks)) {
        uint32_t per[LINE_LEDGERS] = {0}, left = s->na + s->ncd;
        for (uint32_t i = 0; i < s->na + s->ncd; i++)
            per[line_index(s, i < s->na ? s->adds[i] : s->counted[i - s->na])]++;
        while (left > max_acks / 2) { /* the ledgers they are most in, the most first (the first of a tie) */
            int most = 0;
            for (int k = 1; k <= s->ns; k++)
                if (per[k] > per[most]) most = k;
            if (!per[most]) break;
            lg_add(&due, most), left -= per[most], per[most] = 0;
        }
    }
    Ledgers written = lg_and(due, &held); /* (none: a full marker alone, when those due hold nothing now) */
    Ledgers standing = lg_minus(s->c.recs, &s->c.stale);
    return lg_any(&written) || lg_any(&standing) ? written : held;
}

/* to_record(max_acks) -> int: the ledgers a new base of the chain writes records of */
static PyObject *SmallState_to_record(SmallState *s, PyObject *arg) {
    long long most;
    if (ranged_arg(arg, "max_acks", 0, U32_MAX_LL, &most) < 0) return NULL;
    Ledgers written = to_record(s, (uint32_t)most);
    return lg_int(&written);
}

/* keeps only what of adds/counted lies outside the ledgers `written` names; how many stay, and
 * *named how many of those kept were among the first *named (small.py's _kept) */
static uint32_t drop_in(SmallState *s, uint32_t *list, uint32_t n, const Ledgers *written, uint32_t *named) {
    uint32_t m = 0, kept_named = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!lg_has(written, line_index(s, list[i]))) list[m++] = list[i], kept_named += i < *named;
    *named = kept_named;
    return m;
}

/* took_base(version, written, nbytes) -> (marker, below, keeps) | None: a flush wrote a record of
 * each ledger of the line `written` names (bit k: the k-th), `nbytes` of keys and values, under
 * the form's next sequences, in the line's order: the chain's new base, adopted as flush_small
 * adopts what it writes (undo_small gives it back). The marker to write under the sequence after
 * them: a delta one naming the new records and what changed since the last marker when the chain
 * goes on (other ledgers' records stand, none went, no trim due), else a full one naming every
 * ledger's record (these, and, unless the state was written whole, the others' with the acks and
 * counts since them); and the trim it makes: below the chain before but its records (-1: none),
 * when the state was written whole, else by a full marker's rule. `written` may name none when the
 * state is not written whole: the full marker alone. None, changing nothing, when a field of the
 * marker is outside the fixed layout. small.py's _took_base. */
static PyObject *SmallState_took_base(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    long long version, nbytes;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "took_base(version, written, nbytes)");
        return NULL;
    }
    if (ranged_arg(args[0], "version", 0, 255, &version) < 0) return NULL;
    if ((nbytes = PyLong_AsLongLong(args[2])) == -1 && PyErr_Occurred()) return NULL;
    Ledgers written, gone = {{0}}, recs = {{0}};
    int over = !PyLong_Check(args[1]) || lg_of(args[1], &written) != 1;
    int whole = s->fresh || s->c.base < 0 || !lg_any(&s->c.recs) || s->rec == NULL;
    over = over || lg_top(&written) > s->ns;
    if (!over) { /* a stale ledger not written holds nothing now (M moved past its acks): its record goes */
        if (!whole) gone = lg_minus(s->c.stale, &written), recs = lg_minus(s->c.recs, &gone);
        recs = lg_or(recs, &written);
    }
    if (!lg_any(&recs)) {
        PyErr_Format(PyExc_ValueError, "took_base: %R names no ledger of the line, or one past it", args[1]);
        return NULL;
    }
    if (nbytes < 0 || nbytes > UINT32_MAX / 2 || s->ended) {
        PyErr_Format(PyExc_ValueError, "took_base(%lld, ..., %lld): not a new chain of this form", version, nbytes);
        return NULL;
    }
    long long below = -1, seq = (long long)s->next_seq;
    int m = lg_count(&written);
    int trim = s->c.base >= 0 && (whole || chain_outgrown(s->c.deltas, s->every, s->c.chain_bytes, s->c.base_bytes) ||
                                  chain_garbage_due(s->c.untrimmed, s->c.base_bytes));
    Ledgers others = lg_minus(recs, &written);
    int full = trim || whole || lg_any(&gone) || !m || !lg_any(&others);
    if (past_layout(s, full ? seq - 1 : s->c.marker, &recs)) Py_RETURN_NONE;
    PyObject *keeps = trim ? records_of(&s->c, s->rec) : PyTuple_New(0);
    if (keeps == NULL || rec_room(s) < 0) {
        Py_XDECREF(keeps);
        return NULL;
    }
    stash(s);
    if (trim) below = s->c.base, s->slots = 0; /* (below the chain: trimmed) */
    Ledgers renewed = lg_or(written, &gone);
    uint32_t named = s->named, cnamed = s->cnamed;
    if (whole) {
        for (int k = 0; k < LINE_LEDGERS; k++) s->rec[k] = -1;
        rechain(s);
    } else { /* (what the new records hold is no longer since a record; a delta names the rest since the last) */
        s->na = drop_in(s, s->adds, s->na, &renewed, &named);
        s->ncd = drop_in(s, s->counted, s->ncd, &renewed, &cnamed);
    }
    for (int k = 0, i = 0; k < LINE_LEDGERS; k++)
        if (lg_has(&written, k)) s->rec[k] = seq + i++;
    s->c.recs = recs, memset(&s->c.stale, 0, sizeof(Ledgers));
    if (lg_has(&renewed, 0) || whole) { /* (M's ledger's record written: above M alone) */
        s->c.passed = s->dropped = 0;
        s->low = held_low(s);
    }
    s->named = full ? 0 : named, s->cnamed = full ? 0 : cnamed;
    s->c.record = -1;
    for (int k = 0; k < LINE_LEDGERS; k++)
        if (lg_has(&recs, k) && (s->c.record < 0 || s->rec[k] < s->c.record)) s->c.record = s->rec[k];
    Out o = {NULL, 0, 0};
    if (s->fresh || marker_write(s, (uint32_t)version, full, full ? seq - 1 : s->c.marker, &written, &o) < 0) {
        PyMem_Free(o.b); /* (fresh: no room to track) */
        Py_DECREF(keeps);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    named_low(s); /* (the marker names every ack since the records, or since the last marker) */
    s->named = s->na, s->cnamed = s->ncd;
    PyObject *marker = PyBytes_FromStringAndSize((const char *)o.b, o.len);
    PyMem_Free(o.b);
    if (marker == NULL) {
        Py_DECREF(keeps);
        return NULL;
    }
    s->c.marker = seq + m;
    if (full) {
        s->c.base = s->c.marker;
        s->c.base_bytes = (unsigned long long)o.len, s->c.deltas = 0, s->c.chain_bytes = 0, s->c.tail = 0;
    } else {
        s->c.deltas++;
        s->c.chain_bytes += (unsigned long long)o.len;
    }
    unsigned long long total = (unsigned long long)nbytes + 16 + (unsigned long long)o.len;
    s->c.untrimmed = trim ? 0 : whole ? total : s->c.untrimmed + total;
    adopted(s, (unsigned long long)m + 1, (uint32_t)total, 0);
    return Py_BuildValue("(NLN)", marker, below, keeps);
}

/* reset(ledger, entry): a position reset to (ledger, entry), a place the caller checked:
 * M is the entry before it and the read position that entry; nothing above M is acked or
 * counted any more; the line is M's new ledger alone, unbounded until `bound` gives its
 * spans and limit again (its directory version -1); the form changed */
static PyObject *SmallState_reset(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyLong_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "reset(ledger: int, entry: int)");
        return NULL;
    }
    long long ledger = PyLong_AsLongLong(args[0]), e;
    if (ledger == -1 && PyErr_Occurred()) return NULL;
    if (entry_of(args[1], "entry", &e) < 0) return NULL;
    if (ledger < 0) {
        PyErr_Format(PyExc_ValueError, "ledger %lld is not a ledger id (>= 0)", ledger);
        return NULL;
    }
    s->md_l = ledger, s->md_e = e - 1;
    s->rp_e = e, s->rp_i = 0;
    drop_batches(s, 0, ENTRY_MAX);
    runs_clear(s);
    s->nc = s->cdead = 0, s->ns = 0;
    s->limit = -1, s->limit_version = -1;
    touch(s, 0);
    unchain(s);
    Py_RETURN_NONE;
}

/* unchain(): the next state is written whole, naming no record the chain wrote before
 * (small.py's PySmallState.unchain) */
static PyObject *SmallState_unchain(SmallState *s, PyObject *unused) {
    unchain(s);
    Py_RETURN_NONE;
}

/* range_count() -> int: the ranges the form holds as the parts count them (a run across
 * M's ledger's end is one in each ledger) */
static PyObject *SmallState_range_count(SmallState *s, PyObject *unused) {
    return PyLong_FromUnsignedLong(s->n + crossing(s));
}

/* unacked(start, stop, n) -> [entry, ...]: up to n entries of the form in [start, stop) not
 * acked, ascending */
static PyObject *SmallState_unacked(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "unacked(start, stop, n)");
        return NULL;
    }
    long long start = PyLong_AsLongLong(args[0]), stop, n;
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (((stop = PyLong_AsLongLong(args[1])) == -1 || (n = PyLong_AsLongLong(args[2])) == -1) && PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    long long e = start > s->md_e + 1 ? start : s->md_e + 1;
    uint32_t lo = run_from(s, (unsigned long long)e);
    while (PyList_GET_SIZE(out) < n && e < stop) {
        if (lo < s->n && run_first(s, lo) <= e) {
            e = (long long)run_last(s, lo) + 1;
            lo++;
            continue;
        }
        PyObject *v = PyLong_FromLongLong(e);
        if (v == NULL || PyList_Append(out, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
        e++;
    }
    return out;
}

/* end(): the cursor left the small form; no flush takes this one again */
static PyObject *SmallState_end(SmallState *s, PyObject *unused) {
    s->ended = 1;
    s->dirty = 0;
    Py_RETURN_NONE;
}

/* set_props(packed): the properties, packed as the state layout writes them (b"": none);
 * the form changed */
static PyObject *SmallState_set_props(SmallState *s, PyObject *packed) {
    if (!PyBytes_Check(packed)) {
        PyErr_Format(PyExc_TypeError, "properties are packed bytes, not %R", packed);
        return NULL;
    }
    Py_SETREF(s->props, Py_NewRef(packed));
    touch(s, 0);
    Py_RETURN_NONE;
}

/* runs() -> [(first, last), ...] */
static PyObject *SmallState_runs(SmallState *s, PyObject *unused) {
    uint32_t *tmp;
    const uint32_t *flat = runs_flat(s, &tmp);
    PyObject *out = flat == NULL ? NULL : pair_list(flat, s->n);
    PyMem_Free(tmp);
    return out;
}

/* the line's ledger k (0..ns) from `arg` into *k; -1 with an exception */
static int line_arg(SmallState *s, PyObject *arg, int *k) {
    long long v;
    if (ranged_arg(arg, "k", 0, s->ns, &v) < 0) return -1;
    *k = (int)v;
    return 0;
}

/* the bounds [b[2x], b[2x + 1]) of the runs of the line's k-th ledger (k from `arg`), its own
 * entries (the form's less the ledger's offset; a run across its start or end cut there), *n of
 * them (PyMem; NULL with an exception) */
static uint64_t *ledger_bounds(SmallState *s, PyObject *arg, uint32_t *n) {
    int k;
    uint32_t i;
    if (line_arg(s, arg, &k) < 0) return NULL;
    *n = ranges_in(s, k, &i);
    unsigned long long start = line_start(s, k), end = line_end(s, k);
    uint64_t *b = PyMem_Malloc(sizeof(uint64_t) * (2 * (size_t)*n + 1));
    if (b == NULL) return (uint64_t *)PyErr_NoMemory();
    for (uint32_t x = 0; x < *n; x++) {
        uint64_t first = run_first(s, i + x), stop = (uint64_t)run_last(s, i + x) + 1;
        b[2 * x] = (first > start ? first : start) - start;
        b[2 * x + 1] = (stop < end ? stop : end) - start;
    }
    return b;
}

/* acks_of(k) -> bytes: the line's k-th ledger's acks (M's: above M), its own entries, in the
 * portable roaring serialization: what a record of that ledger holds (small.base_puts reads it
 * into a BitMap; PySmallState.acks_of, the same). */
static PyObject *SmallState_acks_of(SmallState *s, PyObject *arg) {
    uint32_t n;
    uint64_t *b = ledger_bounds(s, arg, &n);
    if (b == NULL) return NULL;
    PyObject *out = roaring_of_bounds(b, 2 * (Py_ssize_t)n);
    PyMem_Free(b);
    return out;
}

/* runs_of(k) -> [(first, last), ...]: the line's k-th ledger's runs of acks (M's: above M), its
 * own entries, as the parts hold them (PySmallState.runs_of, the same) */
static PyObject *SmallState_runs_of(SmallState *s, PyObject *arg) {
    uint32_t n;
    uint64_t *b = ledger_bounds(s, arg, &n);
    if (b == NULL) return NULL;
    PyObject *out = PyList_New(n);
    for (uint32_t x = 0; out != NULL && x < n; x++) {
        PyObject *t = Py_BuildValue("(KK)", (unsigned long long)b[2 * x], (unsigned long long)b[2 * x + 1] - 1);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, x, t);
    }
    PyMem_Free(b);
    return out;
}

/* whether the k-th ledger of the line (0: M's) holds state: a run's entries, a delivery count,
 * a partial batch (small.py's _holds; the counts tidied) */
static int holds(SmallState *s, int k) {
    unsigned long long start = line_start(s, k), end = line_end(s, k);
    return ranges_in(s, k, NULL) || count_from(s, start) < count_from(s, end) || batch_from(s, start) < batch_from(s, end);
}

/* held() -> int: the ledgers of the line holding state (bit k: the k-th, 0 M's; small.py's _held) */
static Ledgers held_of(SmallState *s) {
    Ledgers out = {{0}};
    if (s->unread != NULL) { /* (a record read lazily is M's ledger's, holding acks: and nothing else) */
        lg_add(&out, 0);
        return out;
    }
    counts_tidy(s);
    for (int k = 0; k <= s->ns; k++)
        if (holds(s, k)) lg_add(&out, k);
    return out;
}

/* how many ledgers of the whole line hold state (small.py's _held_count) */
static int held_count(SmallState *s) {
    if (s->unread != NULL) return 1;
    counts_tidy(s);
    int out = 0;
    for (int k = 0; k <= s->ns; k++) out += holds(s, k);
    return out;
}

static PyObject *SmallState_held(SmallState *s, PyObject *unused) {
    (void)unused;
    Ledgers held = held_of(s);
    return lg_int(&held);
}

static PyObject *SmallState_held_count(SmallState *s, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(held_count(s));
}

/* what the form holding state in `ledgers` ledgers is charged against its cursor's cache
 * budget, as the parts charge theirs (small.py's _charge) */
static unsigned long long charge_of(SmallState *s, int ledgers) {
    return LEDGER_CHARGE * (unsigned long long)ledgers + RANGE_CHARGE * (unsigned long long)(s->n + counts_held(s)) +
           BATCH_CHARGE * (unsigned long long)s->nb;
}

/* whether the form is over its cursor's budget: its state in more than one ledger (one alone
 * is held whatever its size, as the parts hold one ledger over the budget) and charged more
 * (small.py's _over_budget). O(1) while clearly within it, else held_of's */
static int over_budget(SmallState *s) {
    if (s->budget < 0 || charge_of(s, s->ns + 1) <= (unsigned long long)s->budget) return 0;
    int ledgers = held_count(s);
    return ledgers > 1 && charge_of(s, ledgers) > (unsigned long long)s->budget;
}

/* charge() -> int: what the form is charged against its cursor's budget (PySmallState.charge) */
static PyObject *SmallState_charge(SmallState *s, PyObject *unused) {
    (void)unused;
    return PyLong_FromUnsignedLongLong(charge_of(s, held_count(s)));
}

/* msgpack's smallest form of int v, as msgpack.packb writes it (ints of the layout: -1 up) */
static int mp_put_int(Out *o, long long v) {
    unsigned char *p;
    if (v >= 0 && v <= 0x7F) {
        if ((p = out_room(o, 1)) == NULL) return -1;
        p[0] = (unsigned char)v;
    } else if (v < 0 && v >= -32) {
        if ((p = out_room(o, 1)) == NULL) return -1;
        p[0] = (unsigned char)(0xE0 | (v + 32));
    } else if (v < 0) {
        PyErr_Format(PyExc_ValueError, "%lld is not an int of a ledger record", v);
        return -1;
    } else {
        int n = v <= 0xFF ? 1 : v <= 0xFFFF ? 2 : v <= 0xFFFFFFFFLL ? 4 : 8;
        if ((p = out_room(o, 1 + n)) == NULL) return -1;
        p[0] = (unsigned char)(n == 1 ? 0xCC : n == 2 ? 0xCD : n == 4 ? 0xCE : 0xCF);
        for (int i = 0; i < n; i++) p[1 + i] = (unsigned char)((unsigned long long)v >> (8 * (n - 1 - i)));
    }
    return 0;
}

/* a msgpack array (0x90, 0xdc, 0xdd) or bin (0xc4, 0xc5, 0xc6) head of n items or bytes */
static int mp_put_head(Out *o, int bin, unsigned long long n) {
    int w = bin ? (n <= 0xFF ? 1 : n <= 0xFFFF ? 2 : 4) : (n <= 15 ? 0 : n <= 0xFFFF ? 2 : 4);
    unsigned char *p = out_room(o, 1 + w);
    if (p == NULL) return -1;
    p[0] = (unsigned char)(bin ? (w == 1 ? 0xC4 : w == 2 ? 0xC5 : 0xC6) : (w == 0 ? 0x90 | n : w == 2 ? 0xDC : 0xDD));
    for (int i = 0; i < w; i++) p[1 + i] = (unsigned char)(n >> (8 * (w - 1 - i)));
    return 0;
}

/* record_of(k, version, flags, first, last, code) -> bytes: the line's k-th ledger's record
 * (records.encode_ledger's bytes) of the form's state there: its acks as bitmaps.encode_bitmap
 * coded them (flags, first, last, code: of acks_of(k)'s set), their runs, the partial batches
 * and delivery counts of its entries, the cursor's id (PySmallState.record_of, the same bytes). */
static PyObject *SmallState_record_of(SmallState *s, PyObject *const *args, Py_ssize_t nargs) {
    long long version, flags, first, last;
    int k;
    if (nargs != 6 || !PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "record_of(k, version, flags, first, last, code: bytes)");
        return NULL;
    }
    if (line_arg(s, args[0], &k) < 0) return NULL;
    args++;
    if (ranged_arg(args[0], "version", 0, 255, &version) < 0 || ranged_arg(args[1], "flags", 0, 255, &flags) < 0 ||
        ranged_arg(args[2], "first", 0, U32_MAX_LL, &first) < 0 || ranged_arg(args[3], "last", -1, U32_MAX_LL, &last) < 0)
        return NULL;
    counts_tidy(s);
    unsigned long long start = line_start(s, k), end = line_end(s, k);
    uint32_t c0 = count_from(s, start), b0 = batch_from(s, start);
    uint32_t nc = count_from(s, end) - c0, nb = batch_from(s, end) - b0, runs = ranges_in(s, k, NULL);
    long long ledger = k ? s->span_l[k - 1] : s->md_l;
    Py_ssize_t code = PyBytes_GET_SIZE(args[4]);
    Out o = {NULL, 0, 0};
    unsigned char *p;
    if ((p = out_room(&o, 7)) == NULL) goto fail; /* the envelope, sealed last */
    if (mp_put_head(&o, 0, nc ? 9 : 8) < 0 || mp_put_int(&o, ledger) < 0 || mp_put_int(&o, flags) < 0 ||
        mp_put_int(&o, first) < 0 || mp_put_int(&o, last) < 0 || mp_put_head(&o, 1, (unsigned long long)code) < 0)
        goto fail;
    if (code && (p = out_room(&o, code)) == NULL) goto fail;
    if (code) memcpy(p, PyBytes_AS_STRING(args[4]), code);
    if (mp_put_int(&o, runs) < 0 || mp_put_head(&o, 0, nb) < 0) goto fail;
    for (uint32_t i = b0; i < b0 + nb; i++) { /* [entry, size, the mask's (size + 7) // 8 bytes, little-endian] */
        uint32_t size = s->bat[2 * i + 1];
        size_t len = (size + 7) / 8;
        if (mp_put_head(&o, 0, 3) < 0 || mp_put_int(&o, (long long)(s->bat[2 * i] - start)) < 0 ||
            mp_put_int(&o, size) < 0 || mp_put_head(&o, 1, len) < 0 || (p = out_room(&o, (Py_ssize_t)len)) == NULL)
            goto fail;
        if (_PyLong_AsByteArray((PyLongObject *)s->bmask[i], p, len, 1, 0) < 0) goto fail;
    }
    if (mp_put_int(&o, (long long)s->cursor_id) < 0) goto fail;
    if (nc) { /* [entry, count, ...] */
        if (mp_put_head(&o, 0, 2ULL * nc) < 0) goto fail;
        for (uint32_t i = c0; i < c0 + nc; i++)
            if (mp_put_int(&o, (long long)(s->counts[2 * i] - start)) < 0 || mp_put_int(&o, s->counts[2 * i + 1]) < 0)
                goto fail;
    }
    if (seal_envelope_at(&o, 0, 1, (uint32_t)version) < 0) goto fail; /* (RECORD_LEDGER) */
    PyObject *out = PyBytes_FromStringAndSize((const char *)o.b, o.len);
    PyMem_Free(o.b);
    return out;
fail:
    PyMem_Free(o.b);
    return NULL;
}

/* (the methods that use the runs read a lazy open's first: bound and adopt serve an open, and know) */
READ_FIRST_FAST(SmallState_record_of)
READ_FIRST(SmallState_runs_of)
READ_FIRST(SmallState_acks_of)
READ_FIRST(SmallState_held)
READ_FIRST(SmallState_charge)
READ_FIRST(SmallState_records)
READ_FIRST(SmallState_to_record)
READ_FIRST_FAST(SmallState_took_base)
READ_FIRST_FAST(SmallState_ack_range)
READ_FIRST_FAST(SmallState_ack_entries)
READ_FIRST(SmallState_runs)
READ_FIRST(SmallState_acked)
READ_FIRST(SmallState_ack_positions)
READ_FIRST(SmallState_deliver_positions)
READ_FIRST_FAST(SmallState_set_counts)
READ_FIRST(SmallState_count)
READ_FIRST_FAST(SmallState_counts)
READ_FIRST(SmallState_batches)
READ_FIRST(SmallState_batch)
READ_FIRST_FAST(SmallState_ack_batch)
READ_FIRST(SmallState_fits)
READ_FIRST(SmallState_top)
READ_FIRST(SmallState_range_count)
READ_FIRST(SmallState_read_from)
READ_FIRST(SmallState_rewind)
READ_FIRST_FAST(SmallState_reset)
READ_FIRST_FAST(SmallState_unacked)
READ_FIRST(SmallState_end)
READ_FIRST(SmallState_set_props)

static PyMethodDef SmallState_methods[] = {
    {"record_of", (PyCFunction)(void (*)(void))SmallState_record_of_read, METH_FASTCALL,
     "The line's k-th ledger's record of the form's state there, its acks coded as given (PySmallState.record_of)."},
    {"runs_of", (PyCFunction)SmallState_runs_of_read, METH_O,
     "runs_of(k) -> [(first, last), ...]: the line's k-th ledger's runs, its own entries."},
    {"acks_of", (PyCFunction)SmallState_acks_of_read, METH_O,
     "The line's k-th ledger's acks, in the portable roaring serialization (PySmallState.acks_of)."},
    {"held", (PyCFunction)SmallState_held_read, METH_NOARGS, "The ledgers of the line holding state (PySmallState.held)."},
    {"held_count", (PyCFunction)SmallState_held_count, METH_NOARGS,
     "How many ledgers of the whole line hold state (PySmallState.held_count)."},
    {"charge", (PyCFunction)SmallState_charge_read, METH_NOARGS, "What the form is charged against its cursor's budget."},
    {"records", (PyCFunction)SmallState_records_read, METH_NOARGS, "The chain's records, in the line's order."},
    {"to_record", (PyCFunction)SmallState_to_record_read, METH_O,
     "The ledgers a new base of the chain writes records of (PySmallState.to_record)."},
    {"adopt", (PyCFunction)(void (*)(void))SmallState_adopt, METH_FASTCALL,
     "The chain its parts wrote last: the next states are markers naming its record (PySmallState.adopt)."},
    {"took_base", (PyCFunction)(void (*)(void))SmallState_took_base_read, METH_FASTCALL,
     "A flush wrote the form's state as a new chain (small.base_puts): adopted; the trim it makes."},
    {"ack_range", (PyCFunction)(void (*)(void))SmallState_ack_range_read, METH_FASTCALL,
     "Entries first..last of the form acked; whether the runs still fit the cap."},
    {"ack_entries", (PyCFunction)(void (*)(void))SmallState_ack_entries_read, METH_FASTCALL,
     "Cursor.ack_entries of a BitMap of a ledger of the line the form takes; whether the runs still fit; None: not taken."},
    {"runs", (PyCFunction)SmallState_runs_read, METH_NOARGS, "The runs above M, [(first, last), ...]."},
    {"acked", (PyCFunction)SmallState_acked_read, METH_O, "Whether an entry of the form is acked."},
    {"ack_positions", (PyCFunction)SmallState_ack_positions_read, METH_O,
     "A list of positions the form takes acked; whether the state still fits; None: not the form's to take."},
    {"deliver_positions", (PyCFunction)SmallState_deliver_positions_read, METH_O,
     "One more delivery of each position the form takes; each one's count after; None: not the form's to take."},
    {"set_counts", (PyCFunction)(void (*)(void))SmallState_set_counts_read, METH_FASTCALL,
     "Each position's delivery count set to its value, as deliver_positions; None: not the form's to take."},
    {"count", (PyCFunction)SmallState_count_read, METH_O, "An entry's delivery count (0: none)."},
    {"counts", (PyCFunction)(void (*)(void))SmallState_counts_read, METH_FASTCALL,
     "The delivery counts above M, [(entry, count), ...], of the entries first..stop - 1 when given."},
    {"batches", (PyCFunction)SmallState_batches_read, METH_NOARGS, "The partial batches above M, [(entry, size, mask), ...]."},
    {"batch", (PyCFunction)SmallState_batch_read, METH_O, "An entry's partial batch (size, mask), or None."},
    {"ack_batch", (PyCFunction)(void (*)(void))SmallState_ack_batch_read, METH_FASTCALL,
     "Indexes of a batch entry acked (the entry once every one is); whether the state still fits."},
    {"fits", (PyCFunction)SmallState_fits_read, METH_NOARGS, "Whether the runs and counts fit the form."},
    {"top", (PyCFunction)SmallState_top_read, METH_NOARGS, "The highest entry holding state: a run's, a count's, or M."},
    {"bound", (PyCFunction)(void (*)(void))SmallState_bound, METH_FASTCALL,
     "The ledgers after M's on the form's line and the form's highest entry, as of a directory version."},
    {"range_count", (PyCFunction)SmallState_range_count_read, METH_NOARGS, "The ranges held, as the parts count them."},
    {"read_from", (PyCFunction)SmallState_read_from_read, METH_O, "A sequential read moved on to an entry."},
    {"rewind", (PyCFunction)SmallState_rewind_read, METH_NOARGS, "Read again from M + 1."},
    {"reset", (PyCFunction)(void (*)(void))SmallState_reset_read, METH_FASTCALL,
     "A position reset: M before (ledger, entry), nothing above it acked or counted; unbounded."},
    {"unchain", (PyCFunction)SmallState_unchain, METH_NOARGS, "The next state is written whole (PySmallState.unchain)."},
    {"unacked", (PyCFunction)(void (*)(void))SmallState_unacked_read, METH_FASTCALL,
     "Up to n entries of the form in [start, stop) not acked."},
    {"end", (PyCFunction)SmallState_end_read, METH_NOARGS, "The cursor left the small form: no flush takes this one again."},
    {"set_props", (PyCFunction)SmallState_set_props_read, METH_O, "The properties, packed (b'': none); the form changed."},
    {NULL, NULL, 0, NULL},
};

/* low: the lowest entry of M's ledger the chain holds acked (a lazy open's form read first) */
static PyObject *SmallState_low(SmallState *s, void *unused) {
    (void)unused;
    return s->unread != NULL && read_unread(s) < 0 ? NULL : PyLong_FromLongLong(s->low);
}

/* unread: True while a lazy open's record waits for the form's first use (read_unread) */
static PyObject *SmallState_unread(SmallState *s, void *unused) {
    (void)unused;
    return PyBool_FromLong(s->unread != NULL);
}

static PyObject *SmallState_nc(SmallState *s, void *unused) { return PyLong_FromUnsignedLong(counts_held(s)); }

static PyObject *SmallState_recs(SmallState *s, void *unused) {
    (void)unused;
    return lg_int(&s->c.recs);
}

static PyObject *SmallState_stale(SmallState *s, void *unused) {
    (void)unused;
    return lg_int(&s->c.stale);
}

static PyGetSetDef SmallState_getset[] = {
    {"recs", (getter)SmallState_recs, NULL, "The ledgers of the line the chain has a record of (bit k: the k-th, 0 M's).",
     NULL},
    {"stale", (getter)SmallState_stale, NULL, "Those whose next record is due (changed past what a marker names).", NULL},
    {"nc", (getter)SmallState_nc, NULL, "Delivery counts held.", NULL},
    {"unread", (getter)SmallState_unread, NULL, "True while a lazy open's record waits for the form's first use.",
     NULL},
    {"low", (getter)SmallState_low, NULL,
     "The lowest entry of M's ledger its record and the chain's markers hold acked (-1: not known).", NULL},
    {"spans", (getter)SmallState_spans, NULL, "The ledgers after M's on the form's line, ((ledger, offset), ...).",
     NULL},
    {NULL},
};

#define MEMBER(name, type, doc) {#name, type, offsetof(SmallState, name), READONLY, doc}
#define CHAIN_MEMBER(name, type, doc) {#name, type, offsetof(SmallState, c.name), READONLY, doc}
static PyMemberDef SmallState_members[] = {
    MEMBER(cursor_id, T_ULONGLONG, "the cursor's id"),
    MEMBER(md_l, T_LONGLONG, "the mark-delete position's ledger"),
    MEMBER(md_e, T_LONGLONG, "the mark-delete position's entry"),
    MEMBER(rp_e, T_LONGLONG, "the read position's entry (the form's)"),
    MEMBER(rp_i, T_UBYTE, "the ledger of the line the read position is in (0: M's, i: the i-th spanned)"),
    MEMBER(limit, T_LONGLONG, "the form's highest entry allowed, as of limit_version"),
    MEMBER(limit_version, T_LONGLONG, "the topic's directory version of the bound (-1: none)"),
    MEMBER(nb, T_UINT, "partial batches held"),
    MEMBER(redeliveries, T_ULONGLONG, "deliveries in the form of entries delivered before"),
    MEMBER(next_seq, T_ULONGLONG, "the log's next sequence"),
    MEMBER(slot, T_UBYTE, "the state slot the newest state is in"),
    MEMBER(slots, T_UBYTE, "which state slots hold a value (bits 0 and 1)"),
    MEMBER(dirty, T_UBYTE, "1 when it changed since its last flush"),
    MEMBER(ended, T_UBYTE, "1 once the cursor left the small form"),
    MEMBER(n, T_UINT, "runs held"),
    {"cap", T_UINT, offsetof(SmallState, cap), 0,
     "the most runs the small form holds (a config change sets it only where the form fits: take_config)"},
    MEMBER(persisted, T_UINT, "runs the newest flushed state holds"),
    {"persist", T_UINT, offsetof(SmallState, persist), 0,
     "the most ranges a flush persists (PIP-299's max_unacked_ranges_to_persist; 0: all)"},
    MEMBER(truncated, T_UBYTE, "1 while its newest state holds only the lowest `persist` ranges"),
    MEMBER(cut_record, T_OBJECT, "then, that state's record as written (None: not known)"),
    MEMBER(over_cap, T_UBYTE, "1 when it held more than `persist` ranges at its last flush in this process"),
    MEMBER(touched, T_ULONGLONG, "the lowest entry changed since its last flush (UNTOUCHED: none; 0: M, the line or the properties)"),
    MEMBER(cut_at, T_ULONGLONG, "the end of the cut its newest state holds, while truncated"),
    MEMBER(flushes, T_ULONGLONG, "flushes in the small form"),
    MEMBER(flush_bytes, T_ULONGLONG, "bytes they wrote (keys and values)"),
    MEMBER(last_bytes, T_UINT, "bytes the last one wrote"),
    MEMBER(props, T_OBJECT_EX, "the properties, packed as the state layout writes them (b'': none)"),
    {"logged", T_UBYTE, offsetof(SmallState, logged), 0,
     "1 when its cursor keeps history: each state goes under its log key, not a state slot"},
    {"base", T_LONGLONG, offsetof(SmallState, c.base), 0,
     "where the newest state is: -1 a state slot, -2 the log (its parts wrote it), else the chain's newest full marker"},
    {"every", T_UINT, offsetof(SmallState, every), 0, "the most delta markers after a full one (full_marker_every)"},
    {"budget", T_LONGLONG, offsetof(SmallState, budget), 0,
     "its cursor's cache budget in bytes (-1: none): a form of several ledgers charged more is its parts' to write"},
    CHAIN_MEMBER(marker, T_LONGLONG, "the newest marker of the form's chain"),
    CHAIN_MEMBER(record, T_LONGLONG, "the chain's oldest record (-1: none): records() gives them all"),
    CHAIN_MEMBER(passed, T_UBYTE, "1 when M moved past entries of its ledger's record since it was written"),
    CHAIN_MEMBER(deltas, T_UINT, "delta markers in the chain since its full marker"),
    CHAIN_MEMBER(chain_bytes, T_ULONGLONG, "their bytes"),
    CHAIN_MEMBER(base_bytes, T_ULONGLONG, "the full marker's bytes"),
    CHAIN_MEMBER(untrimmed, T_ULONGLONG, "the bytes written since the chain's last trim"),
    MEMBER(named, T_UINT, "how many of the acks since the record the markers named"),
    MEMBER(cnamed, T_UINT, "how many of the counted entries since the record the markers named"),
    CHAIN_MEMBER(tail, T_UBYTE, "1 when log keys of the cursor lie under its state slots"),
    MEMBER(fresh, T_UBYTE, "1 when the next state cannot be a marker naming the chain's record"),
    MEMBER(dropped, T_UBYTE, "1 when acks M passed were left unnamed since M's ledger's record was written"),
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
    .tp_getset = SmallState_getset,
};

/* s's next state into `o` (emptied first: a buffer the caller keeps for every form it
 * flushes), as the value of state slot `slot` with `*room` zero bytes of room and its
 * padding (slot_padding; *room grows by it) (its key into `key`), or, `slot` -1, as the
 * state marker its log key holds (the key is the caller's): 1;
 * 0 when its record is over `max_bytes` (the state layout a flush writes takes no more);
 * -1 with an exception */
static int slot_value(SmallState *s, int slot, unsigned char *key, uint32_t version, Py_ssize_t *room,
                      Py_ssize_t max_bytes, int cut, Out *out) {
    Py_ssize_t head = slot < 0 ? 0 : slot_head_len(s->next_seq, *room);
    Out o = *out;
    int value = -1;
    o.len = 0;
    /* the runs and counts of each ledger of the line, its entries less its offset (a run
     * across an offset is one range in each ledger it touches; a ledger with none is not
     * listed) */
    uint32_t *flat_tmp;
    counts_tidy(s);
    const uint32_t *runs = runs_flat(s, &flat_tmp);
    if (runs == NULL) return -1;
    uint32_t n = s->n, nc = s->nc, *counts = s->counts, *tmp = NULL;
    int nseg = s->ns + 1, listed = 0;
    long long ids[SPAN_MOST + 1];
    uint32_t rs[SPAN_MOST + 1], re[SPAN_MOST + 1], cs[SPAN_MOST + 1], ce[SPAN_MOST + 1];
    uint32_t bs[SPAN_MOST + 1], be[SPAN_MOST + 1], os[SPAN_MOST + 1]; /* each ledger's batches (s->bat's), its offset */
    ids[0] = s->md_l;
    os[0] = 0;
    if (s->ns == 0) {
        rs[0] = cs[0] = bs[0] = 0, re[0] = n, ce[0] = nc, be[0] = s->nb;
    } else {
        if ((tmp = PyMem_Malloc(sizeof(uint32_t) * (2 * (n + s->ns) + 2 * nc + 2))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        uint32_t *rt = tmp, *ct = tmp + 2 * (n + s->ns), nr = 0, ncs = 0, i = 0, c = 0, b = 0;
        for (int j = 0; j < nseg; j++) {
            unsigned long long off = j ? s->span_o[j - 1] : 0, end = j < s->ns ? s->span_o[j] : ENTRY_MAX + 1ULL;
            if (j) ids[j] = s->span_l[j - 1];
            os[j] = (uint32_t)off;
            rs[j] = re[j] = nr, cs[j] = ce[j] = ncs, bs[j] = be[j] = b;
            if (off >= end) continue; /* a ledger with no entries */
            for (; b < s->nb && s->bat[2 * b] < end; b++) {
            }
            be[j] = b;
            while (i > 0 && runs[2 * (i - 1) + 1] >= off) i--; /* (the run across the offset, again) */
            for (; i < n && runs[2 * i] < end; i++) {
                if (runs[2 * i + 1] < off) continue;
                rt[2 * nr] = (uint32_t)((runs[2 * i] < off ? off : runs[2 * i]) - off);
                rt[2 * nr + 1] = (uint32_t)((runs[2 * i + 1] >= end ? end - 1 : runs[2 * i + 1]) - off);
                nr++;
            }
            for (; c < nc && counts[2 * c] < end; c++) {
                ct[2 * ncs] = (uint32_t)(counts[2 * c] - off);
                ct[2 * ncs + 1] = counts[2 * c + 1];
                ncs++;
            }
            re[j] = nr, ce[j] = ncs;
        }
        runs = rt, counts = ct;
    }
    for (int j = 0; j < nseg; j++) listed += re[j] > rs[j] || ce[j] > cs[j] || be[j] > bs[j];
    Py_ssize_t np = PyBytes_GET_SIZE(s->props);
    int flags = (nc ? STATE_COUNTS : 0) | (np ? STATE_PROPS : 0) | (s->nb ? STATE_BATCHES : 0) | (cut ? STATE_TRUNCATED : 0);
    if (out_room(&o, head + 7) == NULL) goto done;
    if (put_state_head(&o, flags, s->cursor_id, s->md_l, s->md_e, listed) < 0) goto done;
    long long last = s->md_l;
    for (int k = 0; k < nseg; k++) {
        if (re[k] == rs[k] && ce[k] == cs[k] && be[k] == bs[k]) continue;
        long long start = k ? 0 : s->md_e + 1;
        if (put_varint(&o, (unsigned long long)(ids[k] - last)) < 0 ||
            put_state_runs(&o, ids[k], runs + 2 * rs[k], runs + 2 * rs[k] + 1, 2, re[k] - rs[k], start) < 0)
            goto done;
        if (s->nb) { /* the ledger's partial batches, {entry: (size, mask)}, as the parts' state marker has them */
            PyObject *d = PyDict_New();
            int bad = d == NULL;
            for (uint32_t b = bs[k]; !bad && b < be[k]; b++) {
                PyObject *key = PyLong_FromUnsignedLong(s->bat[2 * b] - os[k]);
                PyObject *v = key == NULL ? NULL : Py_BuildValue("(IO)", s->bat[2 * b + 1], s->bmask[b]);
                bad = v == NULL || PyDict_SetItem(d, key, v) < 0;
                Py_XDECREF(key);
                Py_XDECREF(v);
            }
            bad = bad || put_state_batches(&o, d, ids[k], start) < 0;
            Py_XDECREF(d);
            if (bad) goto done;
        }
        if (nc && put_state_counts(&o, ids[k], counts + 2 * cs[k], counts + 2 * cs[k] + 1, 2, ce[k] - cs[k], start) < 0)
            goto done;
        last = ids[k] + 1;
    }
    unsigned char *at;
    if (np && (at = out_room(&o, np)) == NULL) goto done;
    if (np) memcpy(at, PyBytes_AS_STRING(s->props), np); /* after the ledgers, as the parts' state marker */
    if (seal_envelope_at(&o, head, RECORD_MARKER, version) < 0) goto done;
    value = 0;
    if (o.len - head > max_bytes) goto done; /* the parts' to write */
    if (slot >= 0) { /* its room grown to the padding (slot_padding): the record moves up by it */
        Py_ssize_t pad = slot_padding(o.len - *room);
        if (pad) {
            if (out_room(&o, pad) == NULL) goto done;
            memmove(o.b + head + pad, o.b + head, (size_t)(o.len - pad - head));
            *room += pad;
        }
        put_slot_head(key, o.b, s->cursor_id, slot, s->next_seq, *room);
    }
    value = 1;
done:
    PyMem_Free(tmp);
    PyMem_Free(flat_tmp);
    *out = o; /* (its buffer, perhaps grown) */
    return value;
}

/* how many of counted[from..to) still hold a count (an ack took the others away) */
static uint32_t live_counts(SmallState *s, uint32_t from, uint32_t to) {
    uint32_t k = 0;
    for (uint32_t i = from; i < to; i++) {
        uint32_t e = s->counted[i], c = count_from(s, e);
        k += c < s->nc && s->counts[2 * c] == e && s->counts[2 * c + 1];
    }
    return k;
}

/* the ranges of the line's k-th ledger (a run across its start or end is one there too), and
 * into *first (when given) the first of its runs (small.py's _ranges_in) */
static uint32_t ranges_in(SmallState *s, int k, uint32_t *first) {
    unsigned long long start = line_start(s, k), end = line_end(s, k);
    /* (M's ledger starts the runs, the last ledger ends them: no search, no cache line of the runs missed) */
    uint32_t i = k ? run_from(s, start) : 0, j = k < s->ns ? run_from(s, end) : s->n;
    if (first != NULL) *first = i;
    return start >= end ? 0 : j - i + (j < s->n && run_first(s, j) < end); /* (a ledger with no entries: none) */
}

/* the ledger of the line's k-th place (0: M's) */
static inline long long line_ledger(SmallState *s, int k) { return k ? s->span_l[k - 1] : s->md_l; }

/* whether the acks above M and the counts still standing since the chain's records are more
 * than max_acks: more than a marker names (small.py's _over) */
static int over_acks(SmallState *s, uint32_t max_acks) {
    unsigned long long above = 0; /* (the acks M passed since: one range, not counted) */
    for (uint32_t i = 0; i < s->na; i++) above += s->adds[i] > s->md_e;
    return above + live_counts(s, 0, s->ncd) > max_acks;
}

/* whether a marker of s after `prev` (-1: none, a new cursor's first state, which a full
 * marker names as NO_PREV) naming the ledgers `recs` has a field past the fixed layout's 32
 * bits (small.py's _past_layout) */
static int past_layout(SmallState *s, long long prev, const Ledgers *recs) {
    int top = lg_any(recs) ? lg_top(recs) : 0;
    return prev < -1 || s->cursor_id > U32 || (unsigned long long)s->md_l > U32 || (unsigned long long)(prev + 1) > U32 ||
           (unsigned long long)(s->md_e + 2) > U32 || (unsigned long long)line_ledger(s, top) > U32;
}

/* a marker of s's chain after `prev` into `o` (emptied first): a full one or a delta, naming each
 * ledger with a record (a full one: every one) with its record, its range count, and the acks
 * and delivery counts since it (a delta: those with any since the last marker, and those, and
 * the ledgers `renamed` names: their new records; NULL none): small.py's _marker_items, the
 * same bytes. 0; -1 with an exception */
static int marker_write(SmallState *s, uint32_t version, int full, long long prev, const Ledgers *renamed,
                        Out *out) {
    int top = lg_top(&s->c.recs), several = lg_count(&s->c.recs) > 1; /* (the last ledger with a record) */
    uint32_t from = full ? 0 : s->named, cfrom = full ? 0 : s->cnamed;
    uint32_t adds[DELTA_MOST], ce[DELTA_MOST], cn[DELTA_MOST], na = s->na - from, kc = 0;
    memcpy(adds, s->adds + from, sizeof(uint32_t) * na);
    for (uint32_t i = 1; i < na; i++) /* (a few: insertion sorts) */
        for (uint32_t j = i; j > 0 && adds[j - 1] > adds[j]; j--) {
            uint32_t t = adds[j];
            adds[j] = adds[j - 1], adds[j - 1] = t;
        }
    for (uint32_t i = cfrom; i < s->ncd; i++) { /* the counts that still stand, ascending */
        uint32_t e = s->counted[i], c = count_from(s, e), j;
        if (c >= s->nc || s->counts[2 * c] != e || !s->counts[2 * c + 1]) continue;
        for (j = kc; j > 0 && ce[j - 1] > e; j--) ce[j] = ce[j - 1], cn[j] = cn[j - 1];
        ce[j] = e, cn[j] = s->counts[2 * c + 1];
        kc++;
    }
    uint32_t ia[LINE_LEDGERS], ic[LINE_LEDGERS]; /* where each ledger's acks and counts end */
    Ledgers named = {{0}}; /* the ledgers the marker names */
    uint32_t a = 0, c = 0;
    for (int k = 0; k <= top; k++) {
        unsigned long long end = line_end(s, k);
        uint32_t a0 = a, c0 = c;
        while (a < na && adds[a] < end) a++;
        while (c < kc && ce[c] < end) c++;
        ia[k] = a, ic[k] = c;
        if (lg_has(&s->c.recs, k) && (full || a > a0 || c > c0 || (renamed != NULL && lg_has(renamed, k))))
            lg_add(&named, k);
    }
    int items = lg_count(&named);
    Py_ssize_t np = PyBytes_GET_SIZE(s->props), size = 7 + 28 + 16 * items + 4 * na + 8 * kc + np;
    Out o = *out;
    o.len = 0;
    unsigned char *at = out_room(&o, size);
    if (at == NULL) {
        *out = o;
        return -1;
    }
    at[7] = 0xC1;
    at[8] = full ? FIXED_FULL : 0;
    put32(at + 9, (uint32_t)prev);
    put32(at + 13, (uint32_t)s->md_l);
    put32(at + 17, (uint32_t)(s->md_e + 1));
    put32(at + 21, (uint32_t)s->md_l);
    put32(at + 25, (uint32_t)(s->md_e + 2)); /* (the read position's field: M + 1, + 1) */
    put32(at + 29, (uint32_t)s->cursor_id);
    put16(at + 33, (uint32_t)items);
    unsigned char *p = at + 35;
    for (int k = 0; k <= top; k++) {
        uint32_t a0 = k ? ia[k - 1] : 0, c0 = k ? ic[k - 1] : 0, start = (uint32_t)line_start(s, k);
        if (!lg_has(&named, k)) continue;
        put32(p, (uint32_t)line_ledger(s, k));
        long long seq = several ? s->rec[k] : s->c.record; /* (one record: the chain's own) */
        put32(p + 4, (uint32_t)(seq + 1)); /* (the record's sequence + 1) */
        put32(p + 8, ranges_in(s, k, NULL) + (k == 0 ? s->c.passed : 0));
        put16(p + 12, ia[k] - a0);
        put16(p + 14, ic[k] - c0);
        p += 16;
        for (uint32_t i = a0; i < ia[k]; i++, p += 4) put32(p, adds[i] - start);
        for (uint32_t i = c0; i < ic[k]; i++, p += 8) put32(p, ce[i] - start), put32(p + 4, cn[i]);
    }
    if (np) memcpy(p, PyBytes_AS_STRING(s->props), np);
    int rc = seal_envelope_at(&o, 0, RECORD_MARKER, version);
    *out = o;
    return rc < 0 ? -1 : 0;
}

/* s's next state as a marker of its chain into `o` (emptied first), `*full` whether a full one,
 * `*due` whether the chain made it one (chain.outgrown): 1; 0 when it cannot be one (no chain,
 * fresh, a ledger due a new record, more than max_acks acks and counts since the records, a field
 * past the layout); -1 with an exception (small.py's _marker_record: the same rule, the same bytes) */
static int marker_value(SmallState *s, uint32_t version, uint32_t max_acks, Out *out, int *full, int *due) {
    if (s->c.base < 0 || s->c.record < 0 || s->fresh || lg_any(&s->c.stale) || !lg_any(&s->c.recs) || s->rec == NULL)
        return 0;
    if (past_layout(s, s->c.marker, &s->c.recs)) return 0;
    if (over_acks(s, max_acks)) return 0;
    *due = chain_outgrown(s->c.deltas, s->every, s->c.chain_bytes, s->c.base_bytes);
    Ledgers touched = {{0}}; /* the ledgers with acks or counts since the last marker */
    for (uint32_t i = s->named; i < s->na; i++) lg_add(&touched, line_index(s, s->adds[i]));
    for (uint32_t i = s->cnamed; i < s->ncd; i++) lg_add(&touched, line_index(s, s->counted[i]));
    Ledgers index = lg_and(touched, &s->c.recs);
    int changed = lg_eq(&index, &s->c.recs); /* (every ledger of the index) */
    unsigned long long named = s->named + 2ULL * live_counts(s, 0, s->cnamed);
    *full = chain_full_marker(*due, changed, named);
    return marker_write(s, version, *full, s->c.marker, NULL, out) < 0 ? -1 : 1;
}

/* what undo_small gives back of a flush about to be adopted */
static void stash(SmallState *s) {
    if (lg_count(&s->c.recs) > 1) /* (the records in use alone, when more than one: c.record is the one) */
        memcpy(s->rec + LINE_LEDGERS, s->rec, sizeof(long long) * (size_t)(lg_top(&s->c.recs) + 1));
    s->undo_c = s->c, s->undo_slot = s->slot, s->undo_next = s->next_seq;
    s->undo = UNDO | s->slots | (s->truncated ? UNDO_CUT : 0);
    s->undo_persisted = s->persisted;
}

/* a flush wrote `seqs` sequences of the form's state, `nbytes` in all: adopted (`cut`: the
 * state holds only the lowest `persist` ranges, and the form stays to be flushed, as its parts
 * keep a ledger the cap cut dirty) */
static void adopted(SmallState *s, unsigned long long seqs, uint32_t nbytes, int cut) {
    s->touched = UNTOUCHED;
    s->next_seq += seqs;
    s->dirty = s->truncated = (uint8_t)cut;
    s->persisted = cut ? s->persist : s->n + (uint32_t)crossing(s);
    s->flushes++;
    s->flush_bytes += nbytes;
    s->last_bytes = nbytes;
}

/* PIP-299: where the state a flush persists of s ends on the line when s holds more than
 * `most` ranges: past the lowest `most` of them, counted in each ledger as the parts count
 * them (a run across an offset is one in each ledger), a ledger's counts and batches with its
 * ranges when all of them are persisted, and in the ledger the cut goes through those below the
 * last range persisted (plan.py's _prepare_truncated; small.py's _cut_end) */
static unsigned long long cut_end(SmallState *s, uint32_t most) {
    uint32_t left = most;
    for (int k = 0; k <= s->ns; k++) {
        if (left == 0) return line_start(s, k);
        uint32_t first, r = ranges_in(s, k, &first);
        if (r > left) {
            unsigned long long last = run_last(s, first + left - 1), end = line_end(s, k);
            return last >= end ? end : last + 1;
        }
        left -= r;
    }
    return U32 + 1;
}

/* what cut_view shortened of s, for cut_back */
typedef struct {
    uint32_t n, nc, nb, last;
} Cut;

/* s as the state a flush persists when it ends at `end` (cut_end's): its runs, counts and
 * batches from there on left out, the run across `end` cut at it; cut_back gives them back */
static void cut_view(SmallState *s, unsigned long long end, Cut *keep) {
    counts_tidy(s);
    uint32_t i = run_from(s, end);
    keep->n = s->n, keep->nc = s->nc, keep->nb = s->nb;
    runs_view(s, i + (i < s->n && run_first(s, i) < end));
    keep->last = s->n ? run_last(s, s->n - 1) : 0;
    if (s->n && run_last(s, s->n - 1) >= end) run_put(s, s->n - 1, run_first(s, s->n - 1), (uint32_t)(end - 1));
    s->nc = count_from(s, end), s->nb = batch_from(s, end);
}

static void cut_back(SmallState *s, const Cut *keep) {
    if (s->n) run_put(s, s->n - 1, run_first(s, s->n - 1), keep->last);
    runs_view(s, keep->n); /* (back: the runs past it are as they were) */
    s->nc = keep->nc, s->nb = keep->nb;
}

/* whether `o` holds, after its first `head` bytes, the very bytes of `record` (NULL: no) */
static int same_record(PyObject *record, const Out *o, Py_ssize_t head) {
    return record != NULL && o->len - head == PyBytes_GET_SIZE(record) &&
           memcmp(o->b + head, PyBytes_AS_STRING(record), (size_t)(o->len - head)) == 0;
}

/* s, the `at`-th of those flush_small was given, has its state written now `cut` (PIP-299):
 * (at, whether it was not at its last flush, or the other way round) appended to `capped`
 * (when not NULL) when it is cut or that changed. 0; -1 with an exception */
static int watch_cap(SmallState *s, Py_ssize_t at, int cut, PyObject *capped) {
    int flipped = cut != s->over_cap;
    s->over_cap = (uint8_t)cut;
    if (capped == NULL || !(cut || flipped)) return 0;
    PyObject *t = Py_BuildValue("(ni)", at, flipped);
    int rc = t == NULL ? -1 : PyList_Append(capped, t);
    Py_XDECREF(t);
    return rc;
}

/* flush_small(smalls, version, first_room, max_counts, max_bytes, max_runs, max_acks, chains,
 * written=None, trims=None, based=None, capped=None) -> (Puts, bytes, [over, ...], deltas):
 * small.py's _py_flush_small, the same rule and the same bytes: each changed one's state where
 * it goes (a `logged` one's under its log key, appended to `written`; a marker of its chain; a
 * state slot; a new chain, when `chains` and M's ledger alone holds state: appended to `based`,
 * not written (small.base_puts writes it), else it is over), the trims of those whose state
 * trims appended to `trims` as (form, below, keep); those whose state the layout does not take
 * now are not written. One holding more ranges than `persist` writes the lowest of them alone
 * (cut_end), whole, in a slot or under its log key (logged, or one a slot does not take, when
 * `chains`: its chain's one marker; without, it is over), none when its newest state is that
 * very record (cut_record: the cut holds), and stays dirty; (its index in `smalls`, flipped) is appended to `capped` for each one whose state is
 * cut now, or was at its last flush and is not now
 * (flipped: the one or the other changed at this flush). The pairs go into one Puts
 * (_puts.c): no objects made a form. */
static PyObject *flush_small(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 8 || nargs > 12 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "flush_small(smalls: list, version, first_room, max_counts, max_bytes, "
                                         "max_runs, max_acks, chains, written=None, trims=None, based=None, "
                                         "capped=None)");
        return NULL;
    }
    if (!chain_rules_ready("flush_small")) return NULL;
    PyObject *written = nargs >= 9 && args[8] != Py_None ? args[8] : NULL;
    PyObject *trims = nargs >= 10 && args[9] != Py_None ? args[9] : NULL;
    PyObject *based = nargs >= 11 && args[10] != Py_None ? args[10] : NULL;
    PyObject *capped = nargs == 12 && args[11] != Py_None ? args[11] : NULL;
    int chains = PyObject_IsTrue(args[7]);
    if (chains < 0) return NULL;
    PyObject *given[4] = {written, trims, based, capped};
    const char *names[4] = {"written", "trims", "based", "capped"};
    for (int g = 0; g < 4; g++)
        if (given[g] != NULL && !PyList_Check(given[g])) {
            PyErr_Format(PyExc_TypeError, "flush_small's %s is a list (of the forms it writes so) or None", names[g]);
            return NULL;
        }
    long version = PyLong_AsLong(args[1]);
    Py_ssize_t first_room = PyLong_AsSsize_t(args[2]), max_counts = PyLong_AsSsize_t(args[3]),
               max_bytes = PyLong_AsSsize_t(args[4]), max_runs = PyLong_AsSsize_t(args[5]),
               max_acks = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) return NULL;
    if (version < 0 || version > 0xFF || first_room < 0 || first_room > 64) {
        PyErr_Format(PyExc_ValueError, "flush_small: format %ld or room %zd is outside the layout (0..255, 0..64)",
                     version, first_room);
        return NULL;
    }
    uint32_t most_acks = max_acks < 0 ? 0 : max_acks > DELTA_MOST ? DELTA_MOST : (uint32_t)max_acks;
    PyObject *list = args[0], *puts = puts_new(), *over = PyList_New(0);
    Out o = {NULL, 0, 0}; /* each state's value, in turn */
    if (puts == NULL || over == NULL) goto fail;
    Py_ssize_t total = 0, deltas = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        SmallState *s = (SmallState *)PyList_GET_ITEM(list, i);
        if (Py_TYPE(s) != &SmallStateType) {
            PyErr_Format(PyExc_TypeError, "flush_small flushes SmallStates, not %R", (PyObject *)s);
            goto fail;
        }
        s->undo = 0;
        if (!s->dirty || s->ended) continue;
        if (s->unread != NULL && read_unread(s) < 0) goto fail; /* (a change read it first: never here) */
        if (over_budget(s)) { /* its parts hold it under the budget */
            if (PyList_Append(over, (PyObject *)s) < 0) goto fail;
            continue;
        }
        int cut = s->persist && ranges_over(s, s->persist); /* (PIP-299) */
        unsigned long long seq = s->next_seq;
        unsigned char key[16];
        Py_ssize_t klen = 16;
        put_log_key(key, s->cursor_id, seq);
        long long below = -1;
        PyObject *keeps = NULL; /* (the records a trim below `below` keeps: the chain's, or the one before) */
        int full = 0, due = 0, slot = -1, logs = 0;
        unsigned long long end = cut ? cut_end(s, s->persist) : 0; /* (the cut's end on the line) */
        int done = s->logged || cut ? 0 : marker_value(s, (uint32_t)version, most_acks, &o, &full, &due);
        Py_ssize_t room = 0;
        if (done < 0) goto fail;
        if (!done) { /* the whole state: under its log key (logged), in a slot, or not here */
            if (!s->logged) slot = next_slot(s->slot, s->slots, first_room, &room);
            if (cut && s->truncated && s->cut_record != NULL && s->touched > end && end == s->cut_at) {
                if (watch_cap(s, i, cut, capped) < 0) goto fail; /* nothing changed up to the cut: it holds */
                continue;
            }
            Cut keep = {0, 0, 0, 0};
            if (cut) cut_view(s, end, &keep);
            int many = (Py_ssize_t)(counts_held(s) + s->nb) > max_counts; /* more than a slot's layout takes */
            int wide = !s->logged && (max_runs < 0 || ranges_over(s, (unsigned long long)max_runs));
            int fits = many || wide ? 0 : slot_value(s, slot, key, (uint32_t)version, &room, max_bytes, cut, &o);
            if (fits == 0 && cut && chains && !s->logged) { /* a cut state a slot does not take: under its log key */
                logs = 1, slot = -1, room = 0;
                fits = slot_value(s, -1, key, (uint32_t)version, &room, PY_SSIZE_T_MAX, cut, &o);
            }
            if (cut) cut_back(s, &keep);
            if (fits < 0) goto fail;
            if (!fits && cut) { /* (a cut state a slot does not take, without chains: the parts' to write) */
                if (PyList_Append(over, (PyObject *)s) < 0) goto fail;
                continue;
            }
            if (fits && cut && s->truncated && same_record(s->cut_record, &o, slot < 0 ? 0 : slot_head_len(seq, room))) {
                if (watch_cap(s, i, cut, capped) < 0) goto fail; /* the cut persisted holds: nothing to write */
                s->touched = UNTOUCHED, s->cut_at = end;
                continue;
            }
            if (!fits) {
                int reach = s->md_e < top_entry(s); /* (state above M: a chain of records of it) */
                PyObject *to = chains && based != NULL && !s->logged && reach ? based : over;
                if ((to == based && watch_cap(s, i, 0, capped) < 0) || PyList_Append(to, (PyObject *)s) < 0) goto fail;
                continue;
            }
        }
        stash(s);
        if (done) { /* a marker of the form's chain */
            if (full) { /* (chain.trim_due) */
                if (due || chain_garbage_due(s->c.untrimmed, s->c.base_bytes)) {
                    if ((keeps = records_of(&s->c, s->rec)) == NULL) goto fail;
                    below = s->c.base, s->slots = 0; /* (the slots: below the chain) */
                }
                s->c.base = (long long)seq, s->c.base_bytes = (unsigned long long)o.len;
                s->c.deltas = 0, s->c.chain_bytes = 0;
            } else {
                s->c.deltas++;
                s->c.chain_bytes += (unsigned long long)o.len;
                deltas++;
            }
            s->c.marker = (long long)seq;
            named_low(s);
            s->named = s->na, s->cnamed = s->ncd;
        } else if (s->logged) { /* a cursor that keeps history: its state under its log key, as the parts' */
            if (written != NULL && PyList_Append(written, (PyObject *)s) < 0) goto fail;
        } else if (logs) { /* a cut state a slot does not take: whole, under its log key, its chain's one marker */
            if (s->c.base >= 0) { /* (the marker before stays, and its records: below it goes) */
                if ((keeps = records_of(&s->c, s->rec)) == NULL) goto fail;
                below = s->c.base, s->slots = 0;
            }
            s->c.base = s->c.marker = (long long)seq, s->c.record = -1;
            s->c.tail = 0, s->c.deltas = 0, s->c.chain_bytes = 0;
            memset(&s->c.recs, 0, sizeof(Ledgers)), memset(&s->c.stale, 0, sizeof(Ledgers));
            s->c.base_bytes = (unsigned long long)o.len;
            unchain(s);
        } else { /* a state slot */
            klen = 10;
            if (s->c.base >= 0) { /* leaving the chain: what lies below its full marker goes but its records */
                if ((keeps = records_of(&s->c, s->rec)) == NULL) goto fail;
                below = s->c.base, s->slots = 0;
            }
            if (s->c.base != -1) s->c.tail = 1, s->c.base = -1;
            else if (s->c.tail) { /* the one before in the other slot: every log key goes */
                if ((keeps = Py_BuildValue("(L)", (long long)seq - 1)) == NULL) goto fail;
                below = (long long)seq, s->c.tail = 0;
            }
            s->slot = (uint8_t)slot;
            s->slots |= (uint8_t)(1 << slot);
            unchain(s);
        }
        if (below >= 0 && trims != NULL) {
            PyObject *t = Py_BuildValue("(OLO)", (PyObject *)s, below, keeps);
            int bad = t == NULL || PyList_Append(trims, t) < 0;
            Py_XDECREF(t);
            if (bad) {
                Py_XDECREF(keeps);
                goto fail;
            }
        }
        Py_XDECREF(keeps);
        if (puts_add(puts, key, klen, o.b, o.len) < 0) goto fail;
        if (watch_cap(s, i, cut, capped) < 0) goto fail;
        if (cut) { /* (in a slot: its record after the slot's head) */
            Py_ssize_t head = slot < 0 ? 0 : slot_head_len(seq, room);
            PyObject *record = PyBytes_FromStringAndSize((const char *)o.b + head, o.len - head);
            if (record == NULL) goto fail;
            Py_XSETREF(s->cut_record, record);
        } else {
            Py_CLEAR(s->cut_record);
        }
        uint32_t nbytes = (uint32_t)(klen + o.len);
        s->c.untrimmed = below >= 0 ? 0 : s->c.untrimmed + nbytes;
        adopted(s, 1, nbytes, cut); /* (undo_small gives it back if the write fails) */
        s->cut_at = end;
        total += nbytes;
    }
    PyMem_Free(o.b);
    return Py_BuildValue("(NnNn)", puts, total, over, deltas);
fail:
    PyMem_Free(o.b);
    Py_XDECREF(puts);
    Py_XDECREF(over);
    return NULL;
}

/* undo_small(smalls): each one the last flush_small took, as it was before (its chain and
 * slots), and changed again (written whole next: small.py's _py_undo_small) */
static PyObject *undo_small(PyObject *self, PyObject *list) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "undo_small(smalls: list)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        SmallState *s = (SmallState *)PyList_GET_ITEM(list, i);
        if (Py_TYPE(s) != &SmallStateType || !(s->undo & UNDO) || s->ended) continue;
        s->next_seq = s->undo_next;
        s->c = s->undo_c, s->slot = s->undo_slot;
        if (lg_count(&s->c.recs) > 1)
            memcpy(s->rec, s->rec + LINE_LEDGERS, sizeof(long long) * (size_t)(lg_top(&s->c.recs) + 1));
        else if (lg_any(&s->c.recs))
            s->rec[lg_top(&s->c.recs)] = s->c.record;
        s->slots = s->undo & 3;
        s->truncated = (s->undo & UNDO_CUT) != 0;
        Py_CLEAR(s->cut_record); /* (not known now: the next one is written) */
        s->persisted = s->undo_persisted;
        s->flushes--;
        s->flush_bytes -= s->last_bytes;
        touch(s, 0);
        unchain(s);
        s->undo = 0;
    }
    Py_RETURN_NONE;
}

/* the codes of a ledger record's acks small_of_record reads in one pass (ledger_runs_into's),
 * a bit each: none (0), no holes (1), Rice (8, 9), a stride (16, 17), Elias-Fano (32, 33), run
 * bounds (64); pure_acks.ONE_PASS_CODES */
#define ONE_PASS_CODES (1ULL << 0 | 1ULL << 1 | 1ULL << 8 | 1ULL << 9 | 1ULL << 16 | 1ULL << 17 | 1ULL << 32 | 1ULL << 33)
#define ONE_PASS_BOUNDS 64

/* one ledger's record read into `s` (small_of_record's): `item` is (ledger, offset, stop, record,
 * runs), the line's ledger at `offset` (at or after `*floor`, the stop of the record before it,
 * which becomes `stop`) whose entries end before `stop`; its acks above M appended
 * after the runs of the ledgers before it (a run across the offset joined), then its delivery
 * counts. 1 taken, 0 not (a record the form does not take, or ValueError: damage), -1 with any
 * other exception. O(the record's values). */
static int record_into(SmallState *s, PyObject *item, unsigned long long cid, long long version, uint32_t cap,
                       long long *floor, int lazy) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 5 || !PyBytes_Check(PyTuple_GET_ITEM(item, 3))) {
        PyErr_Format(PyExc_TypeError, "small_of_record's records are (ledger, offset, stop, record: bytes, runs), not %R",
                     item);
        return -1;
    }
    long long ledger = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0)), offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
    long long stop = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2)), runs = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 4));
    if (PyErr_Occurred()) return -1;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 3));
    Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 3));
    long long md_e = s->md_e;
    LedgerBody f;
    if (offset < *floor || stop <= offset || stop > ENTRY_MAX + 1 || len < 7 || p[0] != 0xC1 || p[1] != 1) return 0;
    *floor = stop; /* (the next record's ledger is after this one on the line) */
    if (envelope_ok(p, len, version) < 0) return 0; /* (RECORD_LEDGER in the fixed envelope; damage: clear) */
    if (read_ledger_body(p + 7, len - 7, &f) < 0 || f.nb || f.ledger != ledger || f.nc % 2 ||
        (f.n >= 8 && (f.owner < 0 || (unsigned long long)f.owner != cid)) || (runs >= 0 && f.runs != runs))
        return 0;
    if (f.flags != ONE_PASS_BOUNDS && (f.flags < 0 || f.flags > 63 || !((1ULL << f.flags) & ONE_PASS_CODES))) return 0;
    uint32_t n = s->n;
    if (lazy && !n && !offset && runs >= 0 && f.runs > 0 && !f.nc && f.first > md_e + 1 && f.last < stop &&
        f.runs <= (int64_t)cap) { /* M's ledger's alone, acks only: read at the form's first use (read_unread) */
        s->unread = Py_NewRef(PyTuple_GET_ITEM(item, 3));
        s->unread_top = f.last;
        runs_unread(s, (uint32_t)f.runs); /* (while unread, `n` counts the record's runs) */
        return 1;
    }
    /* the runs stated, past those held (a join across the offset takes one away): room made once */
    uint64_t most = (uint64_t)n + (uint64_t)f.runs;
    if (f.runs < 0 || most > (uint64_t)cap + 1 || most > U32) return 0;
    uint32_t *r = runs_area(s, (uint32_t)f.runs);
    if (r == NULL) return -1;
    int64_t *items = NULL;
    Py_ssize_t m;
    long long end;
    /* the runs decoded at the offset after those held: maximal, ascending, a gap between two
     * (as the code gives them), all past M (M's ledger's record holding acks at or below it:
     * recovery's to read), the first joined to the run before across the offset */
    int rc = ledger_runs_into(f.flags, f.first, f.last, f.payload, f.payload_len, offset, r, f.runs, &m, &end);
    if (rc < 0) return 0; /* (damage: ValueError, cleared; any other error stands) */
    int taken = rc == 0 && m == f.runs && (!m || offset + end - 1 < stop);
    if (taken && m) {
        long long first = r[0], top = n ? (long long)run_last(s, n - 1) : -1;
        if (first <= md_e + 1 || first <= top) taken = 0; /* (M would move, or acks at or below M; out of order) */
        else if (first == top + 1) { /* joined: the runs after it move down one */
            run_put(s, n - 1, run_first(s, n - 1), r[1]);
            memmove(r, r + 2, sizeof(uint32_t) * 2 * (size_t)--m);
        }
    }
    if (taken && n + (uint64_t)m > cap) taken = 0;
    if (taken && runs_took(s, (uint32_t)m) < 0) return -1;
    if (taken && f.nc) { /* the record's delivery counts: (entry, count) pairs, those at or below M gone */
        if ((items = PyMem_Malloc(sizeof(int64_t) * f.nc)) == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (ledger_count_items(&f, items) < 0) taken = 0;
        for (uint32_t i = 0; taken && i < f.nc; i += 2) {
            long long e = offset + items[i];
            if (items[i] < 0 || e >= stop) taken = 0;
            else if (e > md_e && set_count(s, e, items[i + 1]) < 0) goto fail;
        }
    }
    PyMem_Free(items);
    return taken;
fail:
    PyMem_Free(items);
    return -1;
}

/* small_of_record(cursor_id, md_l, md_e, next_seq, slot, slots, cap, props, records, max_version,
 * adds, counts) -> SmallState | None: the small form of a cursor whose newest marker names the
 * records `records` of ledgers of its line (cursor/small.py's chain_opened reads and checks the
 * marker and gives each as (ledger, offset, stop, record, runs), in line order: the ledger at
 * `offset` on the form's line, its entries before `stop`, its record and the runs it is to
 * state, -1: not asked): each record's acks above M and delivery counts at their offset, then
 * `adds` (the form's entries acked since them, a sequence) and `counts` (a dict of the form's
 * entries counted since, the newer count winning), with M, the sequences and slots, `cap` and
 * the packed `props` given. None, so that recovery reads the cursor, for a record not of its
 * ledger and this cursor, not read in one pass (ONE_PASS_CODES, with delivery counts but no
 * partial batch), damaged, stating other than its runs or than `runs`,
 * holding state at or past `stop` or acks at M + 1 (M would move: recovery's to fit), or over
 * `cap` runs or count_cap counts. cursor/small.py's _py_small_of_record, the same rule.
 * O(the records' values + adds + counts). */
static PyObject *small_of_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if ((nargs != 12 && nargs != 13) || !PyBytes_Check(args[7]) || !PyTuple_Check(args[8]) ||
        (args[11] != Py_None && !PyDict_Check(args[11]))) {
        PyErr_SetString(PyExc_TypeError, "small_of_record(cursor_id, md_l, md_e, next_seq, slot, slots, cap, "
                                         "props: bytes, records: tuple, max_version, adds, counts: dict | None, "
                                         "lazy=False)");
        return NULL;
    }
    int lazy = nargs == 13 ? PyObject_IsTrue(args[12]) : 0;
    if (lazy < 0) return NULL;
    unsigned long long cid = PyLong_AsUnsignedLongLong(args[0]), seq = PyLong_AsUnsignedLongLong(args[3]);
    long long md_l = PyLong_AsLongLong(args[1]), md_e = PyLong_AsLongLong(args[2]);
    long slot = PyLong_AsLong(args[4]), slots = PyLong_AsLong(args[5]);
    unsigned long cap = PyLong_AsUnsignedLong(args[6]);
    long long version = PyLong_AsLongLong(args[9]);
    if (PyErr_Occurred()) return NULL;
    uint32_t adds[DELTA_MOST];
    Py_ssize_t na = entries_into(args[10], adds, DELTA_MOST, "an entry acked since");
    if (na < 0) return NULL;
    if (md_l < 0 || md_e < -1 || md_e >= ENTRY_MAX || slot < 0 || slot > 1 || slots < 0 || slots > 3 || cap > U32)
        Py_RETURN_NONE; /* (a marker's position outside the layout: recovery's) */
    SmallState *s = small_new(&SmallStateType, cid, md_l, md_e, seq, (int)slot, (int)slots, (uint32_t)cap, 0);
    if (s == NULL) return NULL;
    int taken = 1;
    long long floor = 0;
    /* (one record and nothing since: its runs may wait for the form's first use) */
    lazy = lazy && PyTuple_GET_SIZE(args[8]) == 1 && !na && (args[11] == Py_None || !PyDict_GET_SIZE(args[11]));
    for (Py_ssize_t i = 0; taken == 1 && i < PyTuple_GET_SIZE(args[8]); i++)
        taken = record_into(s, PyTuple_GET_ITEM(args[8], i), cid, version, (uint32_t)cap, &floor, lazy);
    if (taken < 0) goto fail;
    for (Py_ssize_t i = 0; taken && i < na; i++) { /* the acks since: each takes its count away */
        if (adds[i] <= md_e + 1 || add_run(s, adds[i], adds[i]) < 0) taken = 0; /* (at or below M: recovery's) */
        else drop_counts(s, adds[i], adds[i]);
    }
    Py_ssize_t at = 0;
    PyObject *k, *v;
    while (taken && args[11] != Py_None && PyDict_Next(args[11], &at, &k, &v)) { /* the counts since */
        long long e = PyLong_AsLongLong(k), n = PyLong_AsLongLong(v);
        if (PyErr_Occurred()) goto fail;
        if (e <= md_e) continue;
        uint32_t i = count_from(s, (unsigned long long)e);
        if (i < s->nc && s->counts[2 * i] == e && s->counts[2 * i + 1] && n >= 1 && n <= ENTRY_MAX)
            s->counts[2 * i + 1] = (uint32_t)n; /* (one dropped in place is acked: set_count refuses it) */
        else if (e > ENTRY_MAX || set_count(s, e, n) < 0) taken = 0;
    }
    if (!taken || s->n > cap || counts_held(s) > count_cap) {
        Py_DECREF(s);
        goto clear;
    }
    Py_SETREF(s->props, Py_NewRef(args[7]));
    s->persisted = s->n;
    s->dirty = 0;
    return (PyObject *)s;
fail:
    Py_DECREF(s);
clear: /* damage, or a value the form does not take (ValueError): recovery's to read */
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* small_of_slots(cursor_id, value0, value1, max_version, cap, line=None, logged=None) ->
 * SmallState | None: the small form of a cursor whose log is only its state slots, read from
 * their values (None: the slot holds none), or whose newest state is `logged`, (seq, record)
 * under its log key when newer than both (a cursor that keeps history), with the state
 * layout's readers (_native.h); None when a slot's head is
 * damaged (recovery says what it may have held), when the newest state is not an intact
 * state marker of this cursor, or when it is outside the form: a ledger not on its line,
 * a ledger holding nothing, more than `cap` runs or count_cap counts and partial batches,
 * or a run at M + 1. Its
 * properties are taken as the bytes they are (small_opened checks they decode).
 * cursor/small.py's _py_small_of_slots, the same rule. O(the newest value). */
static PyObject *slots_state(unsigned long long cid, PyObject *const *values, long long max_version,
                             unsigned long cap, PyObject *line, Py_ssize_t line_items, PyObject *logged,
                             Py_ssize_t *nbytes);

static PyObject *small_of_slots(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 5 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError,
                        "small_of_slots(cursor_id, value0, value1, max_version, cap, line=None, logged=None)");
        return NULL;
    }
    unsigned long long cid = PyLong_AsUnsignedLongLong(args[0]);
    long long max_version = PyLong_AsLongLong(args[3]);
    unsigned long cap = PyLong_AsUnsignedLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t nbytes;
    return slots_state(cid, args + 1, max_version, cap, nargs >= 6 ? args[5] : Py_None, 2,
                       nargs == 7 ? args[6] : Py_None, &nbytes);
}

/* small_of_slots' rule: the form of cursor `cid` from its slots' `values` (two, each bytes or
 * None) and `logged`; `line(ledger)` answers a tuple of `line_items` items, the first two
 * (spans, limit); *nbytes: the newest state's record's bytes (without a slot's head) */
static PyObject *slots_state(unsigned long long cid, PyObject *const *values, long long max_version,
                             unsigned long cap, PyObject *line, Py_ssize_t line_items, PyObject *logged,
                             Py_ssize_t *nbytes) {
    unsigned long long logged_seq = 0;
    if (logged != Py_None) { /* (seq, record): the cursor's newest record under a log key */
        if (!PyTuple_Check(logged) || PyTuple_GET_SIZE(logged) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(logged, 1))) {
            PyErr_Format(PyExc_TypeError, "small_of_slots's logged is (seq, record bytes) or None, not %R", logged);
            return NULL;
        }
        logged_seq = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(logged, 0));
        if (PyErr_Occurred()) return NULL;
    }
    const unsigned char *newest = NULL;
    Py_ssize_t newest_len = 0, start = 0;
    unsigned long long seq = 0;
    int slot = -1, held = 0;
    for (int k = 0; k < 2; k++) {
        PyObject *v = values[k];
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
    int from_log = logged != Py_None && (slot < 0 || logged_seq > seq);
    if (from_log) { /* the newest state is under a log key: the record as it is (no slot head) */
        PyObject *v = PyTuple_GET_ITEM(logged, 1);
        newest = (const unsigned char *)PyBytes_AS_STRING(v), newest_len = PyBytes_GET_SIZE(v), start = 0;
        seq = logged_seq;
    } else if (slot < 0) {
        Py_RETURN_NONE;
    }
    if (slot < 0) slot = 1; /* no slot holds a value: the next state's slot is 0 */
    const unsigned char *rec = newest + start;
    Py_ssize_t len = newest_len - start;
    *nbytes = len;
    if (len < 1 || rec[0] != 0xC1) Py_RETURN_NONE; /* not the fixed envelope: recovery's */
    if (envelope_ok(rec, len, max_version) < 0) goto declined;
    if (rec[1] != RECORD_MARKER || len < 8 || rec[7] != 0xC2) Py_RETURN_NONE; /* another layout */
    Reader r = {rec + 7, len - 7, 0};
    int flags;
    unsigned long long got, md_l, md_e1, n, last, ledger, nruns = 0, at = 0, ranges = 0;
    if (get_state_head(&r, &flags, &got, &md_l, &md_e1, &n) < 0) goto declined;
    if (got != cid || n > SPAN_MOST + 1) Py_RETURN_NONE; /* (get_state_head refused unknown flags) */
    /* the line: each ledger's offset and end (M's alone: 0 and past the layout), asked of
     * `line` for a state of more than one ledger (a first one other than M's included) */
    long long ls[SPAN_MOST + 1], os[SPAN_MOST + 1], es[SPAN_MOST + 1];
    int nl = 1;
    ls[0] = (long long)md_l, os[0] = 0, es[0] = ENTRY_MAX + 1;
    if (n > 1 || (n == 1 && r.i < r.len && r.p[r.i] != 0)) { /* (the first ledger's id: its distance from M's) */
        if (line == Py_None) Py_RETURN_NONE;
        PyObject *b = PyObject_CallFunction(line, "K", md_l), *spans;
        if (b == NULL) return NULL;
        int ok = b != Py_None && PyTuple_Check(b) && PyTuple_GET_SIZE(b) == line_items &&
                 PyTuple_Check(spans = PyTuple_GET_ITEM(b, 0)) && PyTuple_GET_SIZE(spans) <= SPAN_MOST;
        long long limit = ok ? PyLong_AsLongLong(PyTuple_GET_ITEM(b, 1)) : 0;
        for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(spans); i++) {
            PyObject *sp = PyTuple_GET_ITEM(spans, i);
            ok = PyTuple_Check(sp) && PyTuple_GET_SIZE(sp) == 2;
            if (ok) {
                ls[nl] = PyLong_AsLongLong(PyTuple_GET_ITEM(sp, 0));
                os[nl] = PyLong_AsLongLong(PyTuple_GET_ITEM(sp, 1));
                es[nl - 1] = os[nl];
                nl++;
            }
        }
        if (ok) es[nl - 1] = limit + 1;
        Py_DECREF(b);
        if (PyErr_Occurred()) return NULL;
        if (!ok) Py_RETURN_NONE;
    }
    SmallState *s = small_new(&SmallStateType, cid, (long long)md_l, (long long)md_e1 - 1, seq + 1, slot, held,
                              (uint32_t)cap, 4);
    if (s == NULL) return NULL;
    s->logged = logged != Py_None; /* (read for a cursor that keeps history: its states go under log keys) */
    unsigned long long nc = 0;
    last = md_l;
    for (unsigned long long k = 0; k < n; k++) {
        if (get_state_ledger(&r, md_l, md_e1, &last, &ledger, &nruns, &at) < 0) goto fail;
        int j = 0;
        while (j < nl && ls[j] != (long long)ledger) j++;
        if (j == nl || nruns > cap) goto outside; /* not on the line; more runs than the form holds */
        unsigned long long off = (unsigned long long)os[j], end = (unsigned long long)es[j], nck = 0, nbk = 0;
        ranges += nruns;
        for (unsigned long long i = 0; i < nruns; i++) {
            unsigned long long first, lst;
            if (get_state_run(&r, ledger, &at, &first, &lst) < 0) goto fail;
            if (off + lst >= end) goto outside; /* past the ledger's end on the line: recovery clips */
            if (add_run(s, (uint32_t)(off + first), (uint32_t)(off + lst)) < 0) goto fail;
        }
        if (flags & STATE_BATCHES) { /* {entry: (size, mask)}, ascending */
            unsigned long long hb = 0;
            PyObject *d = get_state_entries(&r, ledger == md_l ? md_e1 : 0, (long long)ledger, 1, &hb), *key, *v;
            if (d == NULL) goto fail;
            Py_ssize_t pos = 0;
            nbk = (unsigned long long)PyDict_GET_SIZE(d);
            int out = nc + s->nb + nbk > count_cap || (nbk && off + hb >= end); /* more than the form holds; past the end */
            while (!out && PyDict_Next(d, &pos, &key, &v)) {
                long long e = (long long)(off + PyLong_AsUnsignedLongLong(key));
                if (set_batch(s, e, PyTuple_GET_ITEM(v, 0), PyTuple_GET_ITEM(v, 1)) < 0) { /* an acked entry's */
                    if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
                        Py_DECREF(d);
                        goto fail;
                    }
                    PyErr_Clear();
                    out = 1;
                }
            }
            Py_DECREF(d);
            if (out) goto outside;
        }
        if (flags & STATE_COUNTS) {
            unsigned long long cat = ledger == md_l ? md_e1 : 0, centry, count;
            if (get_state_count_n(&r, &nck) < 0) goto fail;
            if (nc + s->nb + nck > count_cap) goto outside; /* more counts than the form holds */
            for (unsigned long long i = 0; i < nck; i++) {
                if (get_state_count(&r, &cat, &centry, &count) < 0) goto fail;
                if (off + centry >= end) goto outside; /* damage, or past the end: recovery's */
                if (set_count(s, (long long)(off + centry), (long long)count) < 0) { /* of an acked entry */
                    if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto fail;
                    PyErr_Clear();
                    goto outside;
                }
            }
            nc += nck;
        }
        if (!nruns && !nck && !nbk) goto outside; /* a ledger with nothing */
    }
    s->persisted = s->n;
    s->truncated = (flags & STATE_TRUNCATED) != 0;
    /* bytes after the ledgers with no properties (none with them); more ranges or counts than
     * the form holds; a run at M + 1 */
    int props = (flags & STATE_PROPS) != 0;
    if ((props ? r.i >= r.len : r.i != r.len) || ranges > cap || nc + s->nb > count_cap || (s->n && run_first(s, 0) == md_e1))
        goto outside;
    if (props) {
        PyObject *packed = PyBytes_FromStringAndSize((const char *)r.p + r.i, r.len - r.i);
        if (packed == NULL) goto fail;
        Py_SETREF(s->props, packed);
    }
    return (PyObject *)s;
outside:
    Py_DECREF(s);
    Py_RETURN_NONE;
fail:
    Py_DECREF(s);
declined: /* damage: recovery's to report */
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* _set_count_cap(cap) -> cap before: the most delivery counts and partial batches a form holds
 * (tests lower it, so that few reach the bound; small.COUNT_CAP is the pure twin's) */
static PyObject *set_count_cap(PyObject *self, PyObject *args) {
    (void)self;
    unsigned int cap;
    if (!PyArg_ParseTuple(args, "I", &cap)) return NULL;
    PyObject *before = PyLong_FromUnsignedLong(count_cap);
    count_cap = cap;
    return before;
}

/* _set_count_moves(moves_most, dead_most) -> (moves_most, dead_most) before: the most counts
 * an ack's drop moves before it drops a count in place, and the most dropped in place a form
 * holds whatever its counts (tests lower the one and raise the other, so that few counts reach
 * the drops in place and what reads the counts finds some) */
static PyObject *set_count_moves(PyObject *self, PyObject *args) {
    (void)self;
    unsigned int most, dead;
    if (!PyArg_ParseTuple(args, "II", &most, &dead)) return NULL;
    PyObject *before = Py_BuildValue("(II)", count_moves_most, count_dead_most);
    count_moves_most = most, count_dead_most = dead;
    return before;
}

/* _set_run_chunks(flat_most, chunk_room) -> (flat_most, chunk_room) before: how many runs a form
 * holds in one array before it holds them in chunks, and a new chunk's room (tests lower both,
 * so that the chunks' splits, joins and drops are reached by few runs) */
static PyObject *set_run_chunks(PyObject *self, PyObject *args) {
    (void)self;
    unsigned int most, room;
    if (!PyArg_ParseTuple(args, "II", &most, &room)) return NULL;
    if (room < 2 || most < 1) {
        PyErr_Format(PyExc_ValueError, "flat_most %u and chunk_room %u: at least 1 and 2", most, room);
        return NULL;
    }
    PyObject *before = Py_BuildValue("(II)", runs_flat_most, runs_chunk_room);
    runs_flat_most = most, runs_chunk_room = room;
    return before;
}

/* line_runs(ledgers) -> bytes: the runs of `ledgers`, (offset, BitMap) pairs in the order of
 * their offsets on a form's line, each BitMap's values at its offset: the flat bounds
 * (first, last, ...) as native u32s, which SmallState takes as its runs; a run across an
 * offset is one. ValueError for a value past the layout (2**32 - 1) or a ledger overlapping
 * the one before. cursor/small.py's _py_line_runs, the same bytes. O(containers + runs). */
static PyObject *line_runs(PyObject *self, PyObject *ledgers) {
    (void)self;
    PyObject *items = PySequence_Fast(ledgers, "line_runs takes a sequence of (offset, BitMap)");
    if (items == NULL) return NULL;
    uint32_t *out = NULL;
    Py_ssize_t n = 0, room = 0; /* pairs in out */
    long long top = -1;         /* the last bound written */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(items, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
            PyErr_SetString(PyExc_TypeError, "a ledger of the line is an (offset, BitMap) tuple");
            goto fail;
        }
        long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
        if (offset == -1 && PyErr_Occurred()) goto fail;
        uint32_t *fs, *ls;
        Py_ssize_t m = bitmap_runs(PyTuple_GET_ITEM(t, 1), &fs, &ls);
        if (m < 0) goto fail;
        int bad = offset < 0 || (m && ((long long)fs[0] + offset <= top || (long long)ls[m - 1] + offset > ENTRY_MAX));
        if (!bad && n + m > room) {
            Py_ssize_t want = room * 2 > n + m ? room * 2 : n + m;
            uint32_t *grown = PyMem_Realloc(out, sizeof(uint32_t) * 2 * (size_t)want);
            if (grown == NULL) {
                PyMem_Free(fs);
                PyMem_Free(ls);
                PyErr_NoMemory();
                goto fail;
            }
            out = grown, room = want;
        }
        for (Py_ssize_t k = 0; !bad && k < m; k++) {
            long long f = offset + fs[k], l = offset + ls[k];
            if (n && f == top + 1) out[2 * n - 1] = (uint32_t)l; /* across the offset: one run */
            else out[2 * n] = (uint32_t)f, out[2 * n + 1] = (uint32_t)l, n++;
            top = l;
        }
        PyMem_Free(fs);
        PyMem_Free(ls);
        if (bad) {
            PyErr_Format(PyExc_ValueError, "ledger at offset %lld of the line is past the layout or the ledger before",
                         offset);
            goto fail;
        }
    }
    Py_DECREF(items);
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)sizeof(uint32_t) * 2 * n);
    PyMem_Free(out);
    return bytes;
fail:
    Py_DECREF(items);
    PyMem_Free(out);
    return NULL;
}

/* one span of bound()'s (ledger, offset) into *l, *o; 0 when it is not two ints */
static int span_of(PyObject *t, long long *l, long long *o) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) return 0;
    *l = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0)), *o = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1));
    return !PyErr_Occurred();
}

/* bound(ledger) as form_open's callers give it: (spans, limit, end) with at most SPAN_MOST
 * spans (a new reference), Py_None for a ledger not in the directory, NULL with an exception */
static PyObject *line_at(PyObject *bound, long long ledger) {
    PyObject *l = PyLong_FromLongLong(ledger), *b = l == NULL ? NULL : PyObject_CallOneArg(bound, l);
    Py_XDECREF(l);
    if (b == NULL || b == Py_None) return b;
    if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(b, 0)) ||
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, 0)) > SPAN_MOST) {
        PyErr_SetString(PyExc_TypeError, "form_open's bound(ledger) is (spans, limit, end) or None");
        Py_DECREF(b);
        return NULL;
    }
    return b;
}

/* the form moved on as fit does (small_span.fit): bound(M's ledger) (spans, limit, end) asked
 * again while M moves on into the next ledger; 1 fitted, 0 M's ledger not in the directory,
 * -1 with an exception. `b` is bound()'s answer for M's ledger (a borrowed reference). */
static int fit_to(SmallState *s, PyObject *bound, PyObject *b) {
    PyObject *own = NULL, *minus = PyLong_FromLong(-1);
    int out = -1;
    if (minus == NULL) return -1;
    for (;;) {
        if (b == Py_None) {
            out = 0;
            break;
        }
        PyObject *bargs[3] = {minus, PyTuple_GET_ITEM(b, 0), PyTuple_GET_ITEM(b, 1)};
        PyObject *moved = SmallState_bound(s, bargs, 3);
        if (moved == NULL) break;
        int again = moved == Py_True;
        Py_DECREF(moved);
        if (!again) {
            out = 1;
            break;
        }
        Py_XSETREF(own, line_at(bound, s->md_l));
        if (own == NULL) break;
        b = own;
    }
    Py_XDECREF(own);
    Py_DECREF(minus);
    return out;
}

/* the form of a cursor whose log is only its state slots, read through `probe` as
 * storage/log.py's slot_values and cursor/small.py's small_opened read it (their compiled twin:
 * slots_state, then fit and the checks as they are); `bound` as form_open takes it. None for an
 * empty log, a state outside the form, or damage (then those Python functions read it). */
static PyObject *slots_form(PyObject *probe, PyObject *bound, unsigned long long cid, long long cap,
                            long long version, long long every, long long budget) {
    PyObject *values[2] = {NULL, NULL}, *result = NULL, *b = NULL;
    SmallState *s = NULL;
    Py_ssize_t nbytes = 0;
    for (int k = 0; k < 2; k++)
        if ((values[k] = slot_of_log(probe, cid, k)) == NULL) goto out;
    PyObject *got = values[0] == Py_None && values[1] == Py_None /* (an empty log: recovery's) */
                        ? Py_NewRef(Py_None)
                        : slots_state(cid, values, version, (unsigned long)cap, bound, 3, Py_None, &nbytes);
    if (got == NULL || got == Py_None) {
        result = got;
        goto out;
    }
    s = (SmallState *)got;
    s->every = (uint32_t)every, s->budget = budget;
    if ((b = line_at(bound, s->md_l)) == NULL) goto out;
    long long end = b == Py_None ? 0 : PyLong_AsLongLong(PyTuple_GET_ITEM(b, 2));
    if (end == -1 && PyErr_Occurred()) goto out;
    int r = b == Py_None || (0 <= end && end <= s->md_e) ? 0 : fit_to(s, bound, b); /* (M past its end: recovery clips) */
    if (r < 0) goto out;
    if (!r || top_entry(s) > s->limit || over_budget(s))
        result = Py_NewRef(Py_None);
    else
        result = Py_BuildValue("(OLinN)", (PyObject *)s, (long long)s->next_seq - 1,
                               held_count(s), nbytes, PyTuple_New(0));
out:
    Py_XDECREF(values[0]);
    Py_XDECREF(values[1]);
    Py_XDECREF(b);
    Py_XDECREF((PyObject *)s);
    return result;
}

/* form_open(cursor_id, probe, bound, cap, max_version, every, budget, state_max_runs, chains) ->
 * (SmallState, state's seq, ledgers read, bytes read, older properties) | None: the small form
 * of a cursor read straight from its log in one call: a log that is only its state slots
 * (slots_form), or one whose newest marker names records of ledgers of its line, read as
 * storage/log.py's newest_marker and cursor/small.py's chain_opened read it (their compiled
 * twin, through _chain.c's read_chain and small_of_record, fit, adopt as they are), for a
 * chain of fixed-layout markers under log keys (`chains`: whether the form keeps chains).
 * `probe`: a py-lmdb Cursor of the log database;
 * `bound(ledger)`: (spans, limit, end) of the ledger's line in the topic's directory
 * (small_span.bound_of and LedgerDirectory.end) or None; the rest the cursor's config's (cap:
 * small.py's _cap). The form's properties are the newest state's as it wrote them, and the
 * older markers' that are not none come as they wrote them (the caller checks that they
 * decode). None for any other cursor or chain, or damage: then those Python
 * functions read it, as before. O(the records' values + the chain's markers). */
static PyObject *form_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "form_open(cursor_id, probe, bound, cap, max_version, every, budget, "
                                         "state_max_runs, chains, lazy)");
        return NULL;
    }
    unsigned long long cid = PyLong_AsUnsignedLongLong(args[0]);
    long long cap = PyLong_AsLongLong(args[3]), version = PyLong_AsLongLong(args[4]), every = PyLong_AsLongLong(args[5]);
    long long budget = PyLong_AsLongLong(args[6]), most_runs = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    int chains = PyObject_IsTrue(args[8]);
    if (chains < 0) return NULL;
    if (cap < 0 || cap > (long long)U32) Py_RETURN_NONE;
    LineChain c;
    int r = read_chain(args[1], cid, version, &c);
    if (r <= 0) {
        if (r < 0) return NULL;
        if (!c.logged) return slots_form(args[1], args[2], cid, cap, version, every, budget);
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *b = NULL, *items = NULL, *found = NULL, *adds = NULL, *counts = NULL, *props = NULL;
    SmallState *s = NULL;
    int order[LINE_MOST], k_of[LINE_MOST];
    long long lines_l[SPAN_MOST + 1], lines_o[SPAN_MOST + 1], limit, end;
    Py_ssize_t nline = 1, nbytes = c.full_bytes + c.chain_bytes;
    if (!chains || !c.n || c.deltas > every) goto none;
    long long fewest = 1, most = 0; /* (chain_opened's: declined before a record is read) */
    for (int i = 0; i < c.n; i++) {
        fewest += (long long)c.e[i].runs - c.e[i].na - 1;
        most += (long long)c.e[i].runs + c.e[i].na;
    }
    if (fewest > cap - cap / 4 || most <= most_runs) goto none;
    if ((b = line_at(args[2], c.md_l)) == NULL) goto fail;
    if (b == Py_None) goto none;
    limit = PyLong_AsLongLong(PyTuple_GET_ITEM(b, 1)), end = PyLong_AsLongLong(PyTuple_GET_ITEM(b, 2));
    if (PyErr_Occurred()) goto fail;
    lines_l[0] = c.md_l, lines_o[0] = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(PyTuple_GET_ITEM(b, 0)); i++, nline++)
        if (!span_of(PyTuple_GET_ITEM(PyTuple_GET_ITEM(b, 0), i), &lines_l[nline], &lines_o[nline])) goto fail_or_none;
    /* every ledger named on the line, its record older than the newest marker */
    for (int i = 0; i < c.n; i++) {
        int k = 0;
        while (k < nline && lines_l[k] != c.e[i].ledger) k++;
        if (k == nline || c.e[i].seq >= c.seq) goto none;
        k_of[i] = k;
    }
    for (int i = 0; i < c.n; i++) order[i] = i; /* (in line order: few, an insertion sort) */
    for (int i = 1; i < c.n; i++)
        for (int j = i; j > 0 && k_of[order[j - 1]] > k_of[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    if ((adds = PyList_New(0)) == NULL || (counts = PyDict_New()) == NULL || (items = PyTuple_New(c.n)) == NULL ||
        (found = PyTuple_New(c.n)) == NULL)
        goto fail;
    for (int j = 0; j < c.n; j++) {
        Named *e = &c.e[order[j]];
        int k = k_of[order[j]];
        long long offset = lines_o[k], stop = k + 1 < nline ? lines_o[k + 1] : limit + 1;
        PyObject *rec = chain_record(args[1], cid, e->seq);
        if (rec == NULL) goto fail;
        if (!PyBytes_Check(rec)) {
            Py_DECREF(rec);
            goto none;
        }
        nbytes += PyBytes_GET_SIZE(rec);
        for (Py_ssize_t a = 0; a < e->na; a++) {
            PyObject *x = PyLong_FromLongLong(offset + e->adds[a]);
            if (x == NULL || PyList_Append(adds, x) < 0) {
                Py_XDECREF(x);
                goto fail;
            }
            Py_DECREF(x);
        }
        for (Py_ssize_t a = 0; a < e->nc; a++) {
            PyObject *x = PyLong_FromLongLong(offset + e->counts[2 * a]), *y = PyLong_FromUnsignedLong(e->counts[2 * a + 1]);
            int bad = x == NULL || y == NULL || PyDict_SetItem(counts, x, y) < 0;
            Py_XDECREF(x);
            Py_XDECREF(y);
            if (bad) goto fail;
        }
        PyObject *item = Py_BuildValue("(LLLNL)", (long long)e->ledger, offset, stop, rec,
                                       e->na || e->nc ? -1LL : (long long)e->runs); /* (it holds the record) */
        PyObject *pair = Py_BuildValue("(iL)", k, e->seq);
        if (item == NULL || pair == NULL) {
            Py_XDECREF(item);
            Py_XDECREF(pair);
            goto fail;
        }
        PyTuple_SET_ITEM(items, j, item);
        PyTuple_SET_ITEM(found, j, pair);
    }
    if (PyList_GET_SIZE(adds) + PyDict_GET_SIZE(counts) > DELTA_MOST) goto none;
    if ((props = PyBytes_FromStringAndSize((const char *)c.props, c.props_len)) == NULL) goto fail;
    PyObject *oargs[13] = {args[0], NULL, NULL, NULL, NULL, NULL, args[3], props, items, args[4], adds, counts, args[9]};
    oargs[1] = PyLong_FromLongLong(c.md_l), oargs[2] = PyLong_FromLongLong(c.md_e);
    oargs[3] = PyLong_FromLongLong(c.seq + 1), oargs[4] = PyLong_FromLong(c.slot), oargs[5] = PyLong_FromLong(c.slots);
    PyObject *got = oargs[1] && oargs[2] && oargs[3] && oargs[4] && oargs[5] ? small_of_record(NULL, oargs, 13) : NULL;
    for (int i = 1; i <= 5; i++) Py_XDECREF(oargs[i]);
    if (got == NULL) goto fail;
    if (got == Py_None) {
        Py_DECREF(got);
        goto none;
    }
    s = (SmallState *)got;
    if ((long long)s->n <= most_runs || s->n > cap - cap / 4 || counts_held(s) > count_cap - count_cap / 4) goto none;
    s->every = (uint32_t)every, s->c.base = -2, s->budget = budget;
    if (0 <= end && end <= c.md_e) goto none;
    r = fit_to(s, args[2], b);
    if (r < 0) goto fail;
    if (!r || top_entry(s) > s->limit || s->md_l != c.md_l || s->md_e != c.md_e) goto none;
    if (PyList_Sort(adds) < 0) goto fail;
    PyObject *counted = PyDict_Keys(counts);
    if (counted == NULL) goto fail;
    PyObject *aargs[8] = {NULL, NULL, found, NULL, adds, counted, NULL, NULL};
    aargs[0] = PyLong_FromLongLong(c.full_seq), aargs[1] = PyLong_FromLongLong(c.seq);
    aargs[3] = PyLong_FromSsize_t(c.full_bytes), aargs[6] = PyLong_FromLong(c.deltas);
    aargs[7] = PyLong_FromSsize_t(c.chain_bytes);
    PyObject *adopted = aargs[0] && aargs[1] && aargs[3] && aargs[6] && aargs[7] ? SmallState_adopt(s, aargs, 8) : NULL;
    for (int i = 0; i < 8; i++)
        if (i != 2 && i != 4) Py_XDECREF(aargs[i]);
    if (adopted == NULL) goto fail;
    Py_DECREF(adopted);
    Ledgers held = held_of(s), unrecorded = lg_minus(held, &s->c.recs);
    if (lg_any(&unrecorded) || over_budget(s)) goto none;
    result = Py_BuildValue("(OLinN)", (PyObject *)s, c.seq, c.n, nbytes,
                           c.older_props ? PyList_AsTuple(c.older_props) : PyTuple_New(0));
    goto done;
fail_or_none:
    if (PyErr_Occurred()) goto fail;
none:
    result = Py_NewRef(Py_None);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF((PyObject *)s);
    Py_XDECREF(b);
    Py_XDECREF(items);
    Py_XDECREF(found);
    Py_XDECREF(adds);
    Py_XDECREF(counts);
    Py_XDECREF(props);
    chain_clear(&c);
    return result;
}

static PyMethodDef small_functions[] = {
    {"_set_run_chunks", (PyCFunction)set_run_chunks, METH_VARARGS,
     "_set_run_chunks(flat_most, chunk_room) -> (flat_most, chunk_room) before (tests only)."},
    {"_set_count_cap", (PyCFunction)set_count_cap, METH_VARARGS, "_set_count_cap(cap) -> cap before (tests only)."},
    {"_set_count_moves", (PyCFunction)set_count_moves, METH_VARARGS,
     "_set_count_moves(moves_most, dead_most) -> (moves_most, dead_most) before (tests only)."},
    {"line_runs", (PyCFunction)line_runs, METH_O, "The runs of a form's line's ledgers, as SmallState takes them."},
    {"small_of_record", (PyCFunction)(void (*)(void))small_of_record, METH_FASTCALL,
     "The small form of a cursor from M's ledger's record its newest marker names (or None)."},
    {"small_of_slots", (PyCFunction)(void (*)(void))small_of_slots, METH_FASTCALL,
     "The small form read from a cursor's state slots, or None (cursor/small.py)."},
    {"flush_small", (PyCFunction)(void (*)(void))flush_small, METH_FASTCALL,
     "Every changed SmallState's state slot value, adopted (cursor/small.py)."},
    {"undo_small", (PyCFunction)undo_small, METH_O, "The last flush_small of these given back (cursor/small.py)."},
    {"form_open", (PyCFunction)(void (*)(void))form_open, METH_FASTCALL,
     "The small form of a cursor read straight from its state slots or its newest marker chain, or None "
     "(cursor/small.py)."},
    {NULL, NULL, 0, NULL},
};

/* called by PyInit__native (_module.c) */
int small_init(PyObject *module) {
    if (PyType_Ready(&SmallStateType) < 0 || chain_init() < 0) return -1;
    Py_INCREF(&SmallStateType);
    if (PyModule_AddObject(module, "SmallState", (PyObject *)&SmallStateType) < 0) {
        Py_DECREF(&SmallStateType);
        return -1;
    }
    return PyModule_AddFunctions(module, small_functions);
}
