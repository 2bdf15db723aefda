/* ackstore._native.acks_roaring and ef_code, and the value decoders of a ledger record's codes
 * (the Elias-Fano code, the Rice code and the gap planes, ackstore/storage/bitmaps.py).
 *
 * acks_roaring reads a ledger record's coded values straight into the bitmap a cursor keeps:
 * the values, or with the holes flag their complement within [first, last], or the runs whose
 * bounds they are, as runs, written in the portable roaring serialization with each container
 * in the smallest of its three forms. BitMap.deserialize of it is the ledger's acks, with no
 * flip or optimize pass after it. Its pure-Python twin is pure_acks.acks_roaring: the same
 * bytes, the same errors.
 *
 * The Elias-Fano code (ef_code writes it) of n ascending values within [first, last]: the
 * count n as a varint, then each value's offset x from first split into its L low bits,
 * packed n x L bits, and its high part x >> L, written as one set bit at (x >> L) + i of
 * n + ((last - first) >> L) + 1 bits; both parts least significant bit first, each padded to
 * a whole byte; L = floor(log2((last - first + 1) / n)), 0 when that is under 1. Near the
 * entropy of values scattered at random (2 + L bits a value), and read with no serial
 * dependency between values: a bit scan of the high part and a shift of the low part.
 *
 * The portable serialization (the RoaringFormatSpec): a cookie, then per container its key
 * (the high 16 bits) and cardinality - 1, then (without runs, or with 4 containers or more)
 * each container's offset, then the containers: an array is its low 16 bits ascending
 * (2 bytes a value, up to 4,096 values), a bitset 8,192 bytes, a run container its number
 * of runs and each run's start and length - 1 (2 + 4 bytes a run). The form chosen: runs
 * when 2 + 4 x runs is smaller than the other form's size (an array's 2 + 2 x values, a
 * bitset's 8,192), else an array up to 4,096 values and a bitset above (the non-run form
 * on a tie, as CRoaring's run_optimize keeps an array or a bitset).
 */
#include "_native.h"
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define EF_AVX2 1 /* ef_lows_avx2 built, used where the machine has AVX2 (ef_tables looks) */
#endif

#define NO_OFFSETS_BELOW 4 /* with run containers, offsets are written for 4 containers or more */
#define FLAG_HOLES 1       /* bitmaps.py's flags */
#define FLAG_GAPS 4
#define FLAG_RICE 8
#define FLAG_EF 32
#define FLAG_BOUNDS 64

/* the 8 bytes at p as a big-endian u64 */
static inline uint64_t load_be64(const unsigned char *p) {
#if defined(__GNUC__) || defined(__clang__)
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
#else
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
#endif
}

/* the number of ones in x (by halves, quarters, bytes: no library call where the build
 * targets CPUs without a popcount instruction) */
static inline uint64_t ones_in(uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555ULL;
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (x * 0x0101010101010101ULL) >> 56;
}

/* the number of ones x starts with (64 for all ones) */
static inline unsigned leading_ones(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return ~x ? (unsigned)__builtin_clzll(~x) : 64;
#else
    unsigned q = 0;
    while (q < 64 && (x >> (63 - q)) & 1) q++;
    return q;
#endif
}

/* A code's count: the varint at p[*pos], *pos moved past it; -1 with ValueError `early`
 * when the payload ends first (or the varint runs past 64 bits). */
static int get_count(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos, uint64_t *count, const char *early) {
    *count = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (*pos >= len || shift > 63) {
            PyErr_SetString(PyExc_ValueError, early);
            return -1;
        }
        unsigned char byte = p[(*pos)++];
        *count |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) return 0;
    }
}

/* The values of a Rice code (bitmaps.py's _rice: k, the count as a varint, then each gap's
 * quotient in unary and k remainder bits, most significant bit first; a quotient of 32 or
 * more is 32 ones and the raw 32-bit gap; the first gap counts from first - 1, the others
 * are one less than the step), ascending, into *out (a PyMem buffer the caller frees), their
 * number into *n. -1 with ValueError for damage (pure_codecs.rice_values' messages). */
static int rice_values(const unsigned char *p, Py_ssize_t len, long long first, uint32_t **out, Py_ssize_t *n) {
    Py_ssize_t pos = 1;
    *out = NULL;
    if (len < 1) {
        PyErr_SetString(PyExc_ValueError, "Rice payload ends early");
        return -1;
    }
    unsigned k = p[0];
    if (k > 31) {
        PyErr_Format(PyExc_ValueError, "Rice parameter k=%u is over 31", k);
        return -1;
    }
    uint64_t count;
    if (get_count(p, len, &pos, &count, "Rice payload ends early") < 0) return -1;
    const unsigned char *body = p + pos;
    Py_ssize_t body_len = len - pos;
    uint64_t bits = (uint64_t)body_len * 8;
    if (count > bits / (1 + k)) {
        PyErr_SetString(PyExc_ValueError, "Rice payload ends early");
        return -1;
    }
    if (first < 0 || first > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "Rice record decodes past 2^32");
        return -1;
    }
    uint32_t *vals = (uint32_t *)PyMem_Malloc((count ? count : 1) * sizeof(uint32_t));
    if (vals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    /* buf: the next bits, most significant first, `avail` of them (zeros past the end, which
     * a code that runs on into them reads as "ends early" once it counts what it used) */
    uint64_t buf = 0, used = 0;
    int avail = 0;
    Py_ssize_t next = 0;
    /* refilled 8 bytes at a time (whole bytes: `next` moves on by those taken whole) */
#define REFILL()                                                                     \
    if (next + 8 <= body_len) {                                                      \
        buf |= load_be64(body + next) >> avail;                                      \
        next += (63 - avail) >> 3;                                                   \
        avail |= 56;                                                                 \
    } else {                                                                         \
        while (avail <= 56) {                                                        \
            buf |= (uint64_t)(next < body_len ? body[next] : 0) << (56 - avail);    \
            next++;                                                                  \
            avail += 8;                                                              \
        }                                                                            \
    }
#define TAKE(nbits) (buf <<= (nbits), avail -= (nbits), used += (nbits))
    int64_t value = first - 1;
    Py_ssize_t m = 0;
    for (uint64_t j = 0; j < count; j++) {
        uint64_t gap;
        REFILL();
        unsigned q = leading_ones(buf);
        if (q < RICE_ESCAPE && q + 1 + k <= (unsigned)avail) { /* the whole code is in buf */
            gap = (uint64_t)q << k | (k ? (buf << (q + 1)) >> (64 - k) : 0);
            TAKE(q + 1 + k);
        } else if (q >= RICE_ESCAPE) {
            TAKE(RICE_ESCAPE);
            REFILL();
            gap = buf >> 32;
            TAKE(32);
        } else {
            TAKE(q + 1);
            gap = (uint64_t)q << k;
            if (k) {
                REFILL();
                gap |= buf >> (64 - k);
                TAKE(k);
            }
        }
        if (used > bits) {
            PyMem_Free(vals);
            PyErr_SetString(PyExc_ValueError, "Rice payload ends early");
            return -1;
        }
        value += (int64_t)gap + 1;
        if (value > 0xFFFFFFFFLL) {
            PyMem_Free(vals);
            PyErr_SetString(PyExc_ValueError, "Rice record decodes past 2^32");
            return -1;
        }
        vals[m++] = (uint32_t)value;
    }
#undef REFILL
#undef TAKE
    *out = vals;
    *n = m;
    return 0;
}

/* The values of gap planes (bitmaps.py's _gap_planes: the four byte planes, low bytes
 * first, of n little-endian uint32 gaps; value i is first + gaps 0..i), ascending with
 * repeats dropped, into *out (a PyMem buffer the caller frees), their number into *n. -1
 * with ValueError for damage (pure_codecs.plane_values' messages). */
static int plane_values(const unsigned char *p, Py_ssize_t len, long long first, uint32_t **out, Py_ssize_t *n) {
    *out = NULL;
    if (len % 4) {
        PyErr_Format(PyExc_ValueError, "gap planes of %zd bytes are not four planes of equal length", len);
        return -1;
    }
    if (first < 0 || first > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "gap record decodes past 2^32");
        return -1;
    }
    Py_ssize_t count = len / 4, m = 0;
    uint32_t *vals = (uint32_t *)PyMem_Malloc((count ? count : 1) * sizeof(uint32_t));
    if (vals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t value = (uint64_t)first;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t gap = (uint64_t)p[i] | ((uint64_t)p[count + i] << 8) | ((uint64_t)p[2 * count + i] << 16) |
                       ((uint64_t)p[3 * count + i] << 24);
        value += gap;
        if (value > 0xFFFFFFFFULL) {
            PyMem_Free(vals);
            PyErr_SetString(PyExc_ValueError, "gap record decodes past 2^32");
            return -1;
        }
        if (m == 0 || vals[m - 1] != (uint32_t)value) vals[m++] = (uint32_t)value;
    }
    *out = vals;
    *n = m;
    return 0;
}

/* the 8 bytes at p as a little-endian u64, of which only `have` (1..8) are there (the rest
 * read as zeros) */
static inline uint64_t load_le64(const unsigned char *p, Py_ssize_t have) {
    uint64_t v = 0;
    if (have >= 8) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(&v, p, 8);
        return v;
#else
        have = 8;
#endif
    }
    for (Py_ssize_t i = 0; i < have; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The low-part width of an Elias-Fano code of n values over a span of `span` entries:
 * floor(log2(span / n)), 0 when the span is under twice the count. */
static inline unsigned ef_width(uint64_t span, uint64_t n) {
    uint64_t q = span / n;
    unsigned w = 0;
    while (q > 1) {
        q >>= 1;
        w++;
    }
    return w;
}

/* the bytes of a low part an EfReader holds in itself (more: a PyMem copy) */
#define EF_LOW_HELD 1024

/* An Elias-Fano code (bitmaps.py's _elias_fano: the count n as a varint, then each value's
 * offset from first split into its L low bits, packed n x L bits, and its high part h, one
 * set bit at h + i of n + ((last - first) >> L) + 1 bits; both packed least significant bit
 * first, each padded to a whole byte; L = ef_width(last - first + 1, n)) being read a block
 * of values at a time (ef_next), with no buffer of all its values: the high part in place in
 * the payload, a byte at a time, the low part copied with 8 zero bytes after it, so that every
 * load of a value's low bits takes 8 bytes. `bad` collects the damage found so far (a value
 * not above the one before, with no branch a value); ef_close checks the last value against
 * the span. */
typedef struct {
    const unsigned char *high;
    unsigned char *low; /* held, or a PyMem copy: ef_close frees it */
    Py_ssize_t high_len, at; /* at: the byte of the high part `bits` are of (-1: none read yet) */
    unsigned width, bits;    /* bits: that byte's set bits not read yet */
    uint32_t first;
    uint32_t add[2]; /* what a value's offset from first is written plus, at an even index and an odd one:
                        first at both (ef_open), unless the caller writes runs from bounds (ef_runs_into) */
    uint64_t n, top, i, bit, bad; /* i: the values read; bit: the next one's low bits */
    int64_t before;
    unsigned char held[EF_LOW_HELD + 8];
} EfReader;

/* a byte's set bits: their positions, ascending (then zeros), and their number */
static unsigned char ef_pos[256][8], ef_count[256];

#ifdef EF_AVX2
static void ef_avx2_tables(void);
#endif

/* ef_pos and ef_count made, and whether ef_lows uses AVX2 (acks_init: once, at import) */
static void ef_tables(void) {
#ifdef EF_AVX2
    ef_avx2_tables();
#endif
    for (int b = 0; b < 256; b++) {
        int n = 0;
        for (int k = 0; k < 8; k++)
            if (b >> k & 1) ef_pos[b][n++] = (unsigned char)k;
        ef_count[b] = (unsigned char)n;
    }
}

/* whether ef_highs scans the high part 8 bits at a time with the SSE2 instructions (where the
 * build has them), or a set bit at a time; _ef_simd switches it (the tests read codes both ways) */
static int ef_simd = 1;

/* The code at p opened for reading into *r, its count into *n; -1 with ValueError for damage
 * (pure_codecs.acks_roaring's messages): a count outside 1..span, a payload of another length
 * than the count and span give, or a high part whose set bits are not the count (so that
 * ef_next gives exactly n values, and never reads past the high part); or with MemoryError.
 * ef_close then, unless it failed. O(n + span / 2**L) (the high part's ones counted, the low
 * part copied). */
static int ef_open(const unsigned char *p, Py_ssize_t len, uint32_t first, uint32_t last, EfReader *r, uint64_t *n) {
    uint64_t span = (uint64_t)last - first + 1, ones = 0;
    Py_ssize_t pos = 0;
    if (get_count(p, len, &pos, n, "Elias-Fano payload ends early") < 0) return -1;
    if (*n < 1 || *n > span) {
        PyErr_Format(PyExc_ValueError, "Elias-Fano count %llu is outside 1..%llu", (unsigned long long)*n,
                     (unsigned long long)span);
        return -1;
    }
    unsigned width = ef_width(span, *n);
    uint64_t low_bytes = (*n * width + 7) / 8, high_bits = *n + ((span - 1) >> width) + 1;
    if ((uint64_t)(len - pos) != low_bytes + (high_bits + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "Elias-Fano payload of %zd bytes does not hold %llu values over %llu entries",
                     len, (unsigned long long)*n, (unsigned long long)span);
        return -1;
    }
    r->high = p + pos + low_bytes, r->high_len = len - pos - (Py_ssize_t)low_bytes;
    for (Py_ssize_t w = 0; w < r->high_len; w += 8) ones += ones_in(load_le64(r->high + w, r->high_len - w));
    if (ones != *n) {
        PyErr_SetString(PyExc_ValueError, "Elias-Fano values are not ascending within their span");
        return -1;
    }
    r->low = low_bytes <= EF_LOW_HELD ? r->held : (unsigned char *)PyMem_Malloc(low_bytes + 8);
    if (r->low == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(r->low, p + pos, low_bytes);
    memset(r->low + low_bytes, 0, 8);
    r->width = width, r->first = first, r->top = span - 1, r->add[0] = r->add[1] = first;
    r->n = *n, r->at = -1, r->bits = 0, r->i = r->bit = r->bad = 0, r->before = -1;
    return 0;
}

/* The high parts of the next `want` values of `r` (no more than are left) into out, the first
 * pass of ef_next: each a set bit's position less its value's index, read a byte of the high
 * part at a time (8 values written from ef_pos at once, as many kept as the byte has set
 * bits) while 8 or more are wanted, else a set bit at a time. Sets r->bad for a high part past
 * 32 bits (past the span: damage; they never go down, each set bit after the one before and
 * one index on, so the last one read says). O(want + the high part's bytes read). */
static Py_ssize_t ef_highs(EfReader *r, uint32_t *out, Py_ssize_t want) {
    const unsigned char *high = r->high;
    Py_ssize_t m = 0, at = r->at;
    uint64_t i = r->i, h = 0;
    unsigned bits = r->bits;
    for (; m < want && bits; m++, i++, bits &= bits - 1) /* (the rest of a byte begun) */
        out[m] = (uint32_t)(h = (uint64_t)at * 8 + (unsigned)__builtin_ctz(bits) - i);
#if defined(__SSE2__)
    if (ef_simd && m + 8 <= want) { /* (bits is 0: whole bytes from here; each holds a set bit to come) */
        const __m128i zero = _mm_setzero_si128(), iota0 = _mm_set_epi32(3, 2, 1, 0), iota4 = _mm_set_epi32(7, 6, 5, 4);
        unsigned b = 0;
        do {
            b = high[++at];
            __m128i p = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)ef_pos[b]), zero);
            __m128i base = _mm_set1_epi32((int)(uint32_t)((uint64_t)at * 8 - i));
            _mm_storeu_si128((__m128i *)(out + m), _mm_add_epi32(_mm_sub_epi32(_mm_unpacklo_epi16(p, zero), iota0), base));
            _mm_storeu_si128((__m128i *)(out + m + 4), _mm_add_epi32(_mm_sub_epi32(_mm_unpackhi_epi16(p, zero), iota4), base));
            m += ef_count[b], i += ef_count[b];
        } while (m + 8 <= want);
        h = (uint64_t)at * 8 + ef_pos[b][ef_count[b] - 1] - (i - 1); /* (the loop ends on a byte with set bits) */
    }
#endif
    for (; m < want; m++, i++, bits &= bits - 1) {
        while (!bits) bits = high[++at];
        out[m] = (uint32_t)(h = (uint64_t)at * 8 + (unsigned)__builtin_ctz(bits) - i);
    }
    r->at = at, r->bits = bits, r->i = i, r->bad |= h >> 32;
    return m;
}

#ifdef EF_AVX2
/* whether ef_lows reads 8 low parts at once with AVX2 (where the machine has it: ef_tables; the
 * tests switch it with _ef_simd), and for each width 1..8 the byte shuffle and the shifts that
 * bring value t's W low bits (bits t x W.. of the 8 bytes the 8 values' low parts fill) to the
 * bottom of lane t */
static int ef_avx2, ef_avx2_machine; /* (in use; and the machine has it) */
static unsigned char ef_pick[9][32];
static uint32_t ef_shift[9][8];

static void ef_avx2_tables(void) {
    ef_avx2 = ef_avx2_machine = __builtin_cpu_supports("avx2");
    for (unsigned w = 1; w <= 8; w++)
        for (unsigned t = 0; t < 8; t++) {
            unsigned at = t * w / 8; /* (each 16-byte half holds the 8 bytes: a lane reads its own half) */
            for (unsigned j = 0; j < 4; j++) ef_pick[w][4 * t + j] = at + j < 8 ? (unsigned char)(at + j) : 0x80;
            ef_shift[w][t] = t * w % 8;
        }
}

/* ef_lows for widths 1..8, 8 values at a time from `g` (a multiple of 8; *before, the value
 * before g's, not negative) while 8 are left: the same values, sums and damage as the loop of
 * ef_lows (a high part past 32 - W bits sets *bad, as a 64-bit value past 32 bits would fail
 * the span). Returns where the values it left begin (ef_lows' loop reads them). O(m - g). */
__attribute__((target("avx2"))) static Py_ssize_t ef_lows_avx2(uint32_t *out, Py_ssize_t m, Py_ssize_t g,
                                                               const unsigned char *low, unsigned W, uint32_t add0,
                                                               uint32_t add1, int64_t *before, uint64_t *bad) {
    const __m256i pick = _mm256_loadu_si256((const __m256i *)ef_pick[W]);
    const __m256i shift = _mm256_loadu_si256((const __m256i *)ef_shift[W]);
    const __m256i mask = _mm256_set1_epi32((int)((1u << W) - 1)), sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i add = _mm256_setr_epi32((int)add0, (int)add1, (int)add0, (int)add1, (int)add0, (int)add1, (int)add0,
                                          (int)add1);
    const __m256i up = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
    const __m128i wide = _mm_cvtsi32_si128((int)W), rest = _mm_cvtsi32_si128(32 - (int)W);
    __m256i prev = _mm256_set1_epi32((int)((uint32_t)*before ^ 0x80000000u)), ok = _mm256_set1_epi32(-1);
    __m256i over = _mm256_setzero_si256();
    for (; g + 8 <= m; g += 8, low += W) {
        uint64_t word;
        memcpy(&word, low, 8); /* (the low part has 8 zero bytes after it) */
        __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)word), pick);
        __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(bytes, shift), mask);
        __m256i h = _mm256_loadu_si256((const __m256i *)(out + g));
        over = _mm256_or_si256(over, _mm256_srl_epi32(h, rest));
        /* (sign bits flipped: the signed order of the lanes is their unsigned order) */
        __m256i x = _mm256_xor_si256(_mm256_or_si256(_mm256_sll_epi32(h, wide), lo), sign);
        __m256i before_x = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(x, up), prev, 1);
        ok = _mm256_and_si256(ok, _mm256_cmpgt_epi32(x, before_x));
        prev = _mm256_permutevar8x32_epi32(x, _mm256_set1_epi32(7));
        _mm256_storeu_si256((__m256i *)(out + g), _mm256_add_epi32(_mm256_xor_si256(x, sign), add));
    }
    *before = (int64_t)(uint32_t)(_mm256_cvtsi256_si32(prev) ^ 0x80000000u);
    if (_mm256_movemask_epi8(ok) != -1 || !_mm256_testz_si256(over, over)) *bad = 1;
    return g;
}
#endif

/* value t of a group of 8 (its high part at out[t], its W low bits at bit t x W of `low`)
 * made whole, plus add0 or add1 (t even or odd): ef_lows' step; *b the value before it, *d
 * set when it is not above that one */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void ef_low(uint32_t *out, unsigned t, const unsigned char *low, const unsigned W, uint64_t mask,
                          uint32_t add0, uint32_t add1, int64_t *b, uint64_t *d) {
    uint64_t lo = (load_le64(low + (t * W) / 8, 8) >> ((t * W) % 8)) & mask;
    int64_t x = (int64_t)((uint64_t)out[t] << W | lo);
    *d |= (uint64_t)(x <= *b);
    *b = x;
    out[t] = (uint32_t)x + (t & 1 ? add1 : add0);
}

/* The low parts of `m` values into out, which holds their high parts (ef_highs'): each value
 * becomes its high part << W | its W low bits, `low` holding the first one's at its first
 * bit, plus add[0] at an even index of out and add[1] at an odd one (out begins at a multiple
 * of 8 values); *bad set for a value not above the one before (*before). Inlined for
 * each width W (ef_next's switch), so that the 8 values in each W bytes are read with constant
 * shifts; the last m % 8 with variable ones. O(m). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void ef_lows(uint32_t *out, Py_ssize_t m, const unsigned char *low, const unsigned W,
                           const uint32_t add[2], int64_t *before, uint64_t *bad) {
    const uint64_t mask = W ? ~0ULL >> (64 - W) : 0;
    const uint32_t add0 = add[0], add1 = add[1]; /* (read once: out may alias them, as the compiler sees it) */
    int64_t b = *before;
    uint64_t d = *bad;
    Py_ssize_t g = 0;
#ifdef EF_AVX2
    if (ef_avx2 && W >= 1 && W <= 8 && m >= 16) {
        if (b < 0) { /* (the first value: above none, which ef_lows_avx2 has no lane for) */
            for (unsigned t = 0; t < 8; t++) ef_low(out, t, low, W, mask, add0, add1, &b, &d);
            g = 8, low += W;
        }
        if (b <= (int64_t)UINT32_MAX) { /* (else damage already: the loop below says so) */
            Py_ssize_t from = g;
            g = ef_lows_avx2(out, m, g, low, W, add0, add1, &b, &d);
            low += (g - from) / 8 * W;
        }
    }
#endif
    for (; g + 8 <= m; g += 8, low += W) /* (8 values' low parts: W bytes) */
        for (unsigned t = 0; t < 8; t++) ef_low(out + g, t, low, W, mask, add0, add1, &b, &d);
    for (unsigned t = 0; g + t < m; t++) ef_low(out + g, t, low, W, mask, add0, add1, &b, &d);
    *before = b, *bad = d;
}

/* The next values of the code `r` reads, up to `room` (a multiple of 8, but for its last
 * call), ascending, into out; their number (0: all read). A value not above the one before
 * sets r->bad. Two passes: the high parts (ef_highs), then the low parts (ef_lows, for the
 * code's width; a block begins at a multiple of 8 values, so at a whole byte of the low part).
 * O(the values + the high part's bytes read). */
static Py_ssize_t ef_next(EfReader *r, uint32_t *out, Py_ssize_t room) {
    Py_ssize_t left = (Py_ssize_t)(r->n - r->i), want = left < room ? left : room;
    const unsigned char *low = r->low + r->bit / 8;
    Py_ssize_t m = ef_highs(r, out, want);
    switch (r->width) {
#define EF_LOWS(W)                                                  \
    case W:                                                         \
        ef_lows(out, m, low, W, r->add, &r->before, &r->bad);       \
        break;
        EF_LOWS(0) EF_LOWS(1) EF_LOWS(2) EF_LOWS(3) EF_LOWS(4) EF_LOWS(5) EF_LOWS(6) EF_LOWS(7) EF_LOWS(8)
        EF_LOWS(9) EF_LOWS(10) EF_LOWS(11) EF_LOWS(12) EF_LOWS(13) EF_LOWS(14) EF_LOWS(15) EF_LOWS(16)
        EF_LOWS(17) EF_LOWS(18) EF_LOWS(19) EF_LOWS(20) EF_LOWS(21) EF_LOWS(22) EF_LOWS(23) EF_LOWS(24)
        EF_LOWS(25) EF_LOWS(26) EF_LOWS(27) EF_LOWS(28) EF_LOWS(29) EF_LOWS(30) EF_LOWS(31) EF_LOWS(32)
#undef EF_LOWS
    }
    r->bit += (uint64_t)m * r->width;
    return m;
}

/* The reading `r` ends: 0 when every value was read, ascending, the last within the span; -1
 * with ValueError (pure_codecs.acks_roaring's message) when not. Frees what ef_open took. */
static int ef_close(EfReader *r) {
    if (r->low != r->held) PyMem_Free(r->low);
    if (r->bad || r->i != r->n || (uint64_t)r->before > r->top) {
        PyErr_SetString(PyExc_ValueError, "Elias-Fano values are not ascending within their span");
        return -1;
    }
    return 0;
}

/* The values of an Elias-Fano code (EfReader's), ascending, into *out (a PyMem buffer the
 * caller frees), their number into *n. -1 with ValueError for damage (pure_codecs.acks_roaring's
 * messages). O(values + span / 2**L). */
static int ef_values(const unsigned char *p, Py_ssize_t len, uint32_t first, uint32_t last, uint32_t **out,
                     Py_ssize_t *nout) {
    EfReader r;
    uint64_t n;
    *out = NULL;
    if (ef_open(p, len, first, last, &r, &n) < 0) return -1;
    uint32_t *vals = (uint32_t *)PyMem_Malloc(n * sizeof(uint32_t));
    if (vals == NULL) {
        ef_close(&r);
        PyErr_NoMemory();
        return -1;
    }
    ef_next(&r, vals, (Py_ssize_t)n);
    if (ef_close(&r) < 0) {
        PyMem_Free(vals);
        return -1;
    }
    *out = vals;
    *nout = (Py_ssize_t)n;
    return 0;
}

/* where ledger_runs_into writes runs: `room` of them at dst, each its first and last entry
 * with `offset` added; `end` one past the last one's last entry (offset not added). A record's
 * values are sunk a block at a time (sink_start, sink_block, sink_end): `n0` the runs there
 * were at its start, `at` where the next run starts (with the holes: the first entry after
 * the last hole; with the bounds: the last bound that starts a run), `seen` its values sunk. */
typedef struct {
    uint32_t *dst;
    Py_ssize_t room, n;
    long long offset;
    uint64_t end;
    Py_ssize_t n0;
    uint64_t at, seen;
} RunSink;

/* run [a, b) written at d (offset added, modulo 2**32 as the caller's check of `end` expects);
 * `over` set and on to `done` when the sink is full */
#define RUN(a, b)                         \
    do {                                  \
        if (d == full) {                  \
            over = 1;                     \
            goto done;                    \
        }                                 \
        d[0] = off + (uint32_t)(a);       \
        d[1] = off + (uint32_t)((b) - 1); \
        d += 2;                           \
        end = (b);                        \
    } while (0)

/* a record's values about to be sunk into `k`, its span starting at `first` */
static void sink_start(RunSink *k, uint32_t first) {
    k->n0 = k->n, k->at = first, k->seen = 0;
}

/* The runs of `n` more checked values of a record's code (ascending: a block of record_values'
 * or ef_next's, or a stride's) into `k`: the values' runs (a repeat is one value, a value next
 * to the run before extends it); with FLAG_HOLES the runs between the holes from the span's
 * first entry; with FLAG_BOUNDS the runs whose inner bounds they are (the first run from the
 * span's first entry). 1 when they are more than its room. O(values). */
static int sink_block(const uint32_t *vals, Py_ssize_t n, long long flags, RunSink *k) {
    uint32_t *d = k->dst + 2 * k->n, *full = k->dst + 2 * k->room, *mine = k->dst + 2 * k->n0, off = (uint32_t)k->offset;
    uint64_t end = k->end, at = k->at, seen = k->seen;
    int over = 0;
    /* holes, with room for every run the block can end (one a hole): the same runs without a
     * look at the room per run, and without a branch a hole (run bounds have their own
     * in-place path, ef_runs_into's) */
    int roomy = full - d >= 2 * (n + 1);
    if (flags & FLAG_HOLES && roomy) {
        for (Py_ssize_t i = 0; i < n; i++) { /* (a hole next to the one before writes a run it takes back) */
            uint64_t v = vals[i];
            d[0] = off + (uint32_t)at, d[1] = off + (uint32_t)v - 1;
            d += 2 * (v > at);
            at = v >= at ? v + 1 : at;
        }
        if (d > k->dst + 2 * k->n) end = (uint64_t)(d[-1] - off) + 1;
    } else if (flags == FLAG_BOUNDS) { /* a run ends at each even-numbered bound and starts at each odd one */
        Py_ssize_t i = 0;
        if (n && seen & 1) at = vals[i++]; /* (a block ending between a pair's two) */
        for (; i + 1 < n; i += 2) {
            RUN(at, vals[i]);
            at = vals[i + 1];
        }
        if (i < n) RUN(at, vals[i++]);
        seen += (uint64_t)n;
    } else if (flags & FLAG_HOLES) { /* a run before each hole that is not next to the one before */
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t v = vals[i];
            if (v > at) RUN(at, v);
            at = v >= at ? v + 1 : at;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t v = vals[i];
            if (d > mine && end >= v) { /* touches the run before (or repeats its end) */
                if (end == v) d[-1] = off + (uint32_t)end++;
                continue;
            }
            RUN(v, v + 1);
        }
    }
done:
    k->n = (d - k->dst) / 2;
    k->end = end, k->at = at, k->seen = seen;
    return over;
}

/* The record's last run into `k` once all its values are sunk (its span ending at `last`):
 * with FLAG_HOLES the run after the last hole, with FLAG_BOUNDS the run from the last bound.
 * 1 when it is more than its room. */
static int sink_end(long long flags, uint32_t last, RunSink *k) {
    uint32_t *d = k->dst + 2 * k->n, *full = k->dst + 2 * k->room, off = (uint32_t)k->offset;
    uint64_t end = k->end;
    int over = 0;
    if (flags == FLAG_BOUNDS || (flags & FLAG_HOLES && k->at <= last)) RUN(k->at, (uint64_t)last + 1);
done:
    k->n = (d - k->dst) / 2;
    k->end = end;
    return over;
}
#undef RUN

/* The runs of all `n` checked values of a record's code into `k` (sink_block's), its span
 * first..last (FLAG_BOUNDS: record_values checked them: pairs, the first above `first`).
 * 1 when they are more than its room. O(values). */
static int sink_values(const uint32_t *vals, Py_ssize_t n, long long flags, uint32_t first, uint32_t last,
                       RunSink *k) {
    sink_start(k, first);
    return sink_block(vals, n, flags, k) || sink_end(flags, last, k);
}

/* a bitset container being filled (under the interpreter lock) */
static uint64_t words[1024];

/* the bitset container `w` as the serialization holds it: its 1,024 words, little-endian */
static void put_words(unsigned char *at, const uint64_t *w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(at, w, 8192);
#else
    for (int i = 0; i < 1024; i++)
        for (int k = 0; k < 8; k++) at[8 * i + k] = (unsigned char)(w[i] >> (8 * k));
#endif
}

enum { FORM_ARRAY, FORM_BITSET, FORM_RUNS };

/* The form a container of `card` values in `nruns` runs is written in (the module
 * docstring): runs when 2 + 4 x runs is smaller than the other form, else an array up to
 * ARRAY_MAX values and a bitset above. */
static inline int form_of(uint64_t card, uint64_t nruns) {
    uint64_t other = card <= ARRAY_MAX ? 2 + 2 * card : 8192;
    return 2 + 4 * nruns < other ? FORM_RUNS : card <= ARRAY_MAX ? FORM_ARRAY : FORM_BITSET;
}

/* one container of the set: its key (the high 16 bits), its runs (those from r0 to r1 - 1,
 * the first and last clipped to it), cardinality and number of runs, and the form written */
typedef struct {
    uint32_t key, card, nruns;
    Py_ssize_t r0, r1;
    int form; /* form_of's */
} Container;

PyObject *roaring_of_bounds(const uint64_t *b, Py_ssize_t nb) {
    Py_ssize_t runs = nb / 2, nc = 0, room = 0, size = 0;
    Container *cs = NULL;
    PyObject *out = NULL;
    for (Py_ssize_t r = 0; r < runs; r++) { /* each run's part in each container it covers */
        uint64_t lo = b[2 * r], end = b[2 * r + 1];
        for (uint64_t key = lo >> 16; key <= (end - 1) >> 16; key++) {
            if (nc == 0 || cs[nc - 1].key != key) {
                if (nc == room) {
                    room = room ? 2 * room : 16;
                    Container *grown = (Container *)PyMem_Realloc(cs, sizeof(Container) * room);
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    cs = grown;
                }
                cs[nc++] = (Container){(uint32_t)key, 0, 0, r, r, 0};
            }
            Container *c = &cs[nc - 1];
            uint64_t from = lo > key << 16 ? lo : key << 16, to = end < (key + 1) << 16 ? end : (key + 1) << 16;
            c->card += (uint32_t)(to - from);
            c->nruns++;
            c->r1 = r + 1;
        }
    }
    int any_runs = 0;
    for (Py_ssize_t j = 0; j < nc; j++) {
        Container *c = &cs[j];
        c->form = form_of(c->card, c->nruns);
        size += c->form == FORM_RUNS     ? 2 + 4 * (Py_ssize_t)c->nruns
                : c->form == FORM_BITSET ? 8192
                                         : 2 * (Py_ssize_t)c->card;
        any_runs |= c->form == FORM_RUNS;
    }
    int offsets = !any_runs || nc >= NO_OFFSETS_BELOW;
    Py_ssize_t head = (any_runs ? 4 + (nc + 7) / 8 : 8) + 4 * nc + (offsets ? 4 * nc : 0);
    if ((out = PyBytes_FromStringAndSize(NULL, head + size)) == NULL) goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *at = o + head, *desc;
    memset(o, 0, head);
    if (any_runs) {
        put32(o, COOKIE_RUNS | (uint32_t)(nc - 1) << 16);
        for (Py_ssize_t j = 0; j < nc; j++)
            if (cs[j].form == FORM_RUNS) o[4 + j / 8] |= (unsigned char)(1u << (j % 8));
        desc = o + 4 + (nc + 7) / 8;
    } else {
        put32(o, COOKIE_NO_RUNS);
        put32(o + 4, (uint32_t)nc);
        desc = o + 8;
    }
    for (Py_ssize_t j = 0; j < nc; j++) {
        const Container *c = &cs[j];
        uint64_t base = (uint64_t)c->key << 16;
        put16(desc + 4 * j, c->key);
        put16(desc + 4 * j + 2, c->card - 1);
        if (offsets) put32(desc + 4 * nc + 4 * j, (uint32_t)(at - o));
        if (c->form == FORM_RUNS) {
            put16(at, c->nruns);
            at += 2;
        } else if (c->form == FORM_BITSET) {
            memset(words, 0, sizeof(words));
        }
        for (Py_ssize_t r = c->r0; r < c->r1; r++) { /* the run's lows: lo..hi */
            uint64_t from = b[2 * r] > base ? b[2 * r] : base, to = b[2 * r + 1] < base + 65536 ? b[2 * r + 1] : base + 65536;
            uint32_t lo = (uint32_t)(from - base), hi = (uint32_t)(to - 1 - base);
            if (c->form == FORM_RUNS) {
                put16(at, lo);
                put16(at + 2, hi - lo);
                at += 4;
            } else if (c->form == FORM_ARRAY) {
                for (uint32_t v = lo; v <= hi; v++, at += 2) put16(at, v);
            } else {
                uint32_t wl = lo >> 6, wh = hi >> 6;
                uint64_t head_mask = ~0ULL << (lo & 63), tail_mask = ~0ULL >> (63 - (hi & 63));
                if (wl == wh) {
                    words[wl] |= head_mask & tail_mask;
                } else {
                    words[wl] |= head_mask;
                    for (uint32_t w = wl + 1; w < wh; w++) words[w] = ~0ULL;
                    words[wh] |= tail_mask;
                }
            }
        }
        if (c->form == FORM_BITSET) { /* the words, little-endian */
            put_words(at, words);
            at += 8192;
        }
    }
done:
    PyMem_Free(cs);
    return out;
}

/* The bytes before `nc` bitset containers of keys k0.. in the portable serialization
 * without run containers: its cookie, the number of containers, each one's key and
 * cardinality - 1 (`cards`), then each one's offset (the containers follow in order, 8,192
 * bytes each). BITSETS_HEAD(nc) bytes. */
#define BITSETS_HEAD(nc) (8 + 8 * (Py_ssize_t)(nc))
static void put_bitsets_head(unsigned char *o, uint32_t k0, uint32_t nc, const uint32_t *cards) {
    put32(o, COOKIE_NO_RUNS);
    put32(o + 4, nc);
    for (uint32_t c = 0; c < nc; c++) {
        put16(o + 8 + 4 * c, k0 + c);
        put16(o + 8 + 4 * c + 2, cards[c] - 1);
        put32(o + 8 + 4 * nc + 4 * c, (uint32_t)(BITSETS_HEAD(nc) + 8192 * (Py_ssize_t)c));
    }
}

#define DENSE_MOST 64 /* the most containers dense_holes writes (spans up to 4 Mi entries) */

/* The set `n` ascending holes `vals` leave in first..last (up to DENSE_MOST containers),
 * written straight when every one of its containers takes the bitset form: the span's bits
 * set, then each hole's cleared (roaring_of_bounds' bytes, with no pass over the runs).
 * NULL with *taken 0 and no exception when a container takes another form (the caller
 * writes the runs); NULL with an exception set on failure. The set's number of maximal runs
 * into *runs. O(values + containers' bytes). */
static PyObject *dense_holes(const uint32_t *vals, Py_ssize_t n, uint32_t first, uint32_t last, int *taken,
                             Py_ssize_t *runs) {
    uint32_t k0 = first >> 16, nc = (last >> 16) - k0 + 1, cards[DENSE_MOST] = {0};
    Py_ssize_t from[DENSE_MOST + 1], i = 0, total = 0;
    int acked_end = 0; /* the container before ends acked: a run that goes on into this one is one run */
    *taken = 0;
    if (nc > DENSE_MOST) return NULL;
    for (uint32_t c = 0; c < nc; c++) { /* each container's cardinality and runs, as roaring_of_bounds counts them */
        uint32_t key = k0 + c, lo = c ? 0 : first & 0xFFFF, hi = key == last >> 16 ? last & 0xFFFF : 0xFFFF, runs = 0;
        uint32_t before = i < n ? vals[i] - 2 : 0; /* (wrapping) never next to the container's first hole */
        from[c] = i;
        for (; i < n && vals[i] >> 16 == key; i++) { /* a run of holes starts at each hole not next to the one before */
            runs += vals[i] != before + 1;
            before = vals[i];
        }
        Py_ssize_t h = i - from[c];
        int acked_lo = !h || (vals[from[c]] & 0xFFFF) != lo, acked_hi = !h || (vals[i - 1] & 0xFFFF) != hi;
        cards[c] = hi - lo + 1 - (uint32_t)h;
        runs = h ? runs + 1 - !acked_lo - !acked_hi : 1;
        if (form_of(cards[c], runs) != FORM_BITSET) return NULL;
        total += (Py_ssize_t)runs - (acked_end && acked_lo);
        acked_end = acked_hi;
    }
    from[nc] = i;
    PyObject *out = PyBytes_FromStringAndSize(NULL, BITSETS_HEAD(nc) + 8192 * (Py_ssize_t)nc);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *at = o + BITSETS_HEAD(nc);
    put_bitsets_head(o, k0, nc, cards);
    for (uint32_t c = 0; c < nc; c++, at += 8192) {
        uint32_t lo = c ? 0 : first & 0xFFFF, hi = k0 + c == last >> 16 ? last & 0xFFFF : 0xFFFF;
        memset(words, 0, sizeof(words));
        for (uint32_t w = lo >> 6; w <= hi >> 6; w++) words[w] = ~0ULL;
        words[lo >> 6] &= ~0ULL << (lo & 63);
        words[hi >> 6] &= ~0ULL >> (63 - (hi & 63));
        for (Py_ssize_t j = from[c]; j < from[c + 1]; j++) words[(vals[j] & 0xFFFF) >> 6] &= ~(1ULL << (vals[j] & 63));
        put_words(at, words);
    }
    *runs = total; /* the containers' runs, less those that go on from one container into the next */
    *taken = 1;
    return out;
}

/* x with each bit the parity of it and the bits below it (a prefix XOR) */
static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    return x ^ x << 32;
}

/* The set whose runs start at first and at every second of the `n` ascending inner bounds
 * `vals` and stop before the bounds between (the last one runs to last), as the run-bounds
 * code holds it, written straight when every one of its containers (up to DENSE_MOST) takes
 * the bitset form (roaring_of_bounds' bytes): each bound toggles its bit in the containers'
 * words, in place in the bytes returned, and a prefix XOR over the words then sets every bit
 * inside a run, with no branch a run. NULL with *taken 0 and no exception when a container
 * takes another form (the caller writes the runs); NULL with an exception set on failure.
 * O(bounds + containers' bytes). */
static PyObject *dense_runs(const uint32_t *vals, Py_ssize_t n, uint32_t first, uint32_t last, int *taken) {
    uint32_t k0 = first >> 16, nc = (last >> 16) - k0 + 1;
    *taken = 0;
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    return NULL; /* the words are written in place as the serialization holds them: little-endian */
#endif
    /* a container takes the bitset form only with 2,048 runs or more (2 + 4 x runs against
     * 8,192 bytes), and a run across a boundary counts in each container it touches: with
     * fewer, the long way writes it, and this is not begun */
    if (nc > DENSE_MOST || (uint64_t)n / 2 + nc < 2048 * (uint64_t)nc) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, BITSETS_HEAD(nc) + 8192 * (Py_ssize_t)nc);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *bits = o + BITSETS_HEAD(nc);
    uint64_t base = (uint64_t)k0 << 16, end = base + ((uint64_t)nc << 16);
    memset(bits, 0, 8192 * (size_t)nc);
    bits[(first - base) >> 3] ^= (unsigned char)(1u << ((first - base) & 7));
    for (Py_ssize_t i = 0; i < n; i++) bits[(vals[i] - base) >> 3] ^= (unsigned char)(1u << ((vals[i] - base) & 7));
    if ((uint64_t)last + 1 < end) bits[(last + 1 - base) >> 3] ^= (unsigned char)(1u << ((last + 1 - base) & 7));
    uint64_t carry = 0;
    uint32_t cards[DENSE_MOST];
    for (uint32_t c = 0; c < nc; c++) { /* each container's words, its cardinality and runs */
        uint64_t card = 0, starts = 0, below = 0;
        for (int w = 0; w < 1024; w++) {
            unsigned char *at = bits + 8192 * (size_t)c + 8 * (size_t)w;
            uint64_t x;
            memcpy(&x, at, 8);
            x = prefix_xor(x) ^ (0 - carry);
            memcpy(at, &x, 8);
            carry = x >> 63;
            card += ones_in(x);
            starts += ones_in(x & ~(x << 1 | below));
            below = x >> 63;
        }
        cards[c] = (uint32_t)card;
        if (form_of(card, starts) != FORM_BITSET) {
            Py_DECREF(out);
            return NULL;
        }
    }
    put_bitsets_head(o, k0, nc, cards);
    *taken = 1;
    return out;
}

/* acks_roaring(flags, first, last, code) -> bytes: the acks a ledger record's bitmap fields
 * hold (bitmaps.decode_bitmap's, for its Elias-Fano codes, the Rice code and the gap planes,
 * the planes decompressed already), in the portable serialization with each container in its
 * smallest form. flags: the record's: the Elias-Fano code of the values (32), the Rice code
 * (8) or the gap planes (4), each perhaps with the holes (1): the values are the holes of
 * first..last; or the Elias-Fano code of the runs' inner bounds (64, alone): an even number
 * of them, where the acks stop and start again within first..last (the acks run from first
 * to the first bound - 1, from the second to the third - 1, ..., from the last to last).
 * first..last: the ledger's span (0..2**32 - 1), which the values lie in. ValueError for
 * damage, as pure_acks.acks_roaring. O(values + the bytes written). */
/* The acks a ledger record's bitmap fields hold (acks_roaring's: the flags, span and code as
 * the record holds them), in the portable serialization, and their number of maximal runs
 * into *runs; NULL with ValueError for damage. */
static PyObject *acks_of(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                         Py_ssize_t *runs);

static PyObject *acks_roaring(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long flags, first, last;
    Py_buffer code;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "acks_roaring(flags, first, last, code)");
        return NULL;
    }
    if (ranged_arg(args[0], "flags", 0, 255, &flags) < 0 || ranged_arg(args[1], "first", 0, U32_MAX_LL, &first) < 0 ||
        ranged_arg(args[2], "last", 0, U32_MAX_LL, &last) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[3], &code, PyBUF_SIMPLE) < 0) return NULL;
    Py_ssize_t runs;
    PyObject *out = acks_of(flags, first, last, (const unsigned char *)code.buf, code.len, &runs);
    PyBuffer_Release(&code);
    return out;
}

/* 0 when `flags` name a code record_values reads and first..last is a span within 0..2**32 - 1;
 * -1 with ValueError (pure_codecs.acks_roaring's messages) */
static int code_span_ok(long long flags, long long first, long long last) {
    int kind = (int)(flags & ~FLAG_HOLES);
    if ((kind != FLAG_EF && kind != FLAG_RICE && kind != FLAG_GAPS && flags != FLAG_BOUNDS)) {
        PyErr_Format(PyExc_ValueError, "acks_roaring reads an Elias-Fano or Rice code or gap planes, not flags %lld",
                     flags);
        return -1;
    }
    if (first < 0 || last > U32_MAX_LL) {
        PyErr_Format(PyExc_ValueError, "the span %lld..%lld is outside 0..%lld", first, last, U32_MAX_LL);
        return -1;
    }
    if (last < first) {
        PyErr_Format(PyExc_ValueError, "last=%lld is below first=%lld", last, first);
        return -1;
    }
    return 0;
}

/* 1 with ValueError (pure_codecs' message) when a run-bounds code (FLAG_BOUNDS) holds other
 * than pairs of bounds after its first run: `n` values, an odd number or none, or the first,
 * `value0`, at the span's first entry (the first run would be empty); 0 otherwise, and for
 * any other code */
static int bounds_unpaired(long long flags, uint64_t n, uint32_t value0, long long first, long long last) {
    if (flags != FLAG_BOUNDS || (n && n % 2 == 0 && value0 != first)) return 0;
    PyErr_Format(PyExc_ValueError, "%zd run bounds inside %lld..%lld are not pairs after the first run", (Py_ssize_t)n,
                 first, last);
    return 1;
}

/* The values a ledger record's bitmap fields code (acks_roaring's flags, span and code), checked
 * as acks_roaring checks them, into *vals (PyMem, the caller frees) and their number into *n;
 * -1 with ValueError for damage or a code it does not read, or with MemoryError. */
static int record_values(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                         uint32_t **vals, Py_ssize_t *n) {
    int kind = (int)(flags & ~FLAG_HOLES);
    *vals = NULL;
    if (code_span_ok(flags, first, last) < 0) return -1;
    int got = kind == FLAG_RICE   ? rice_values(p, len, first, vals, n)
              : kind == FLAG_GAPS ? plane_values(p, len, first, vals, n)
                                  : ef_values(p, len, (uint32_t)first, (uint32_t)last, vals, n);
    if (got < 0) return -1;
    if (*n && (*vals)[*n - 1] > last) {
        PyErr_Format(PyExc_ValueError, "a ledger record's value %lu is past its last entry %lld",
                     (unsigned long)(*vals)[*n - 1], last);
        return -1;
    }
    if (bounds_unpaired(flags, (uint64_t)*n, *n ? (*vals)[0] : 0, first, last)) return -1;
    return 0;
}

/* The run bounds of `n` checked values `vals` of a record's code (record_values'),
 * [b[2i], b[2i + 1]) each, into *out (a PyMem buffer the caller frees) and their number
 * into *nb: sink_values' runs. -1 with MemoryError. O(values). */
static int bounds_of_code(long long flags, long long first, long long last, const uint32_t *vals, Py_ssize_t n,
                          uint64_t **out, Py_ssize_t *nb) {
    Py_ssize_t room = n + 1; /* (holes: one more run than holes at most) */
    uint32_t *runs = (uint32_t *)PyMem_Malloc(sizeof(uint32_t) * 2 * (size_t)room);
    uint64_t *b = (uint64_t *)PyMem_Malloc(sizeof(uint64_t) * 2 * (size_t)room);
    if (runs == NULL || b == NULL) {
        PyMem_Free(runs);
        PyMem_Free(b);
        PyErr_NoMemory();
        return -1;
    }
    RunSink k = {runs, room, 0, 0, 0};
    sink_values(vals, n, flags, (uint32_t)first, (uint32_t)last, &k); /* (never over its room) */
    for (Py_ssize_t i = 0; i < 2 * k.n; i += 2) b[i] = runs[i], b[i + 1] = (uint64_t)runs[i + 1] + 1;
    PyMem_Free(runs);
    *out = b;
    *nb = 2 * k.n;
    return 0;
}

/* the most values of a stride ledger_runs_into expands (more: ValueError, read the long way) */
#define STRIDE_MOST (1 << 20)
/* the portable roaring form of no values (cookie 12346, no containers): a ledger acked whole
 * from first to last is written as its holes, these bytes (bitmaps.py's encode_bitmap) */
static const unsigned char EMPTY_ROARING[8] = {0x3a, 0x30, 0, 0, 0, 0, 0, 0};

/* The values of a stride payload (three varints: the first value's offset from `first`, the
 * step, the count; bitmaps.py's _stride) into *vals and *n, checked as pure_codecs.stride_of
 * checks them; -1 with ValueError for damage or more than STRIDE_MOST values. */
static int stride_values(const unsigned char *p, Py_ssize_t len, long long first, long long last, uint32_t **vals,
                         Py_ssize_t *n) {
    uint64_t offset, step, count;
    Py_ssize_t pos = 0;
    const char *early = "a stride payload ends before its three varints";
    if (get_count(p, len, &pos, &offset, early) < 0 || get_count(p, len, &pos, &step, early) < 0 ||
        get_count(p, len, &pos, &count, early) < 0)
        return -1;
    uint64_t low = (uint64_t)first + offset, top = last < U32_MAX_LL ? (uint64_t)last : (uint64_t)U32_MAX_LL;
    if (pos != len || count < 1 || step < 1 || count > STRIDE_MOST || offset > U32_MAX_LL || step > U32_MAX_LL ||
        low + step * (count - 1) > top) {
        PyErr_Format(PyExc_ValueError, "a stride payload of %zd bytes is not values within %lld..%lld", len, first, last);
        return -1;
    }
    if ((*vals = PyMem_Malloc(sizeof(uint32_t) * (size_t)count)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint64_t i = 0; i < count; i++) (*vals)[i] = (uint32_t)(low + i * step);
    *n = (Py_ssize_t)count;
    return 0;
}

/* the values ef_runs_into reads at a time (on the stack) */
#define EF_BLOCK 256

/* The runs of an Elias-Fano code of values (FLAG_EF, perhaps with FLAG_HOLES) or of run bounds
 * (FLAG_BOUNDS) into `k`, read a block at a time in place (no copy of the code, no buffer of
 * all its values): record_values then sink_values, the same runs, the same errors (every
 * value is read and checked, even past a full sink). 1 when they are more than its room, -1
 * with ValueError for damage. O(values + span / 2**L). */
static int ef_runs_into(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                        RunSink *k) {
    EfReader r;
    uint64_t n;
    uint32_t block[EF_BLOCK];
    if (code_span_ok(flags, first, last) < 0 || ef_open(p, len, (uint32_t)first, (uint32_t)last, &r, &n) < 0)
        return -1;
    int over = 0;
    uint32_t value0 = 0;
    Py_ssize_t m;
    if (flags == FLAG_BOUNDS && k->n == 0 && n + 2 <= 2 * (uint64_t)k->room) {
        /* room for every run (n + 2 entries: no more when the bounds are pairs): the bounds
         * decoded in place one entry in, each even-numbered one less 1 (a run's last entry),
         * between the span's first and last; the same runs and errors as the blocks below */
        uint32_t *d = k->dst, off = (uint32_t)k->offset;
        r.add[0] = r.first + off - 1, r.add[1] = r.first + off;
        ef_next(&r, d + 1, (Py_ssize_t)n);
        value0 = d[1] - off + 1;
        if (ef_close(&r) < 0 || bounds_unpaired(flags, n, value0, first, last)) return -1;
        d[0] = off + (uint32_t)first, d[n + 1] = off + (uint32_t)last;
        k->n = (Py_ssize_t)(n / 2 + 1), k->end = (uint64_t)last + 1;
        return 0;
    }
    sink_start(k, (uint32_t)first);
    while ((m = ef_next(&r, block, EF_BLOCK)) > 0) {
        if (r.i == (uint64_t)m) value0 = block[0]; /* (the first block's) */
        if (!over && !r.bad) over = sink_block(block, m, flags, k); /* (runs of a code refused below: not kept) */
    }
    if (ef_close(&r) < 0 || bounds_unpaired(flags, n, value0, first, last)) return -1;
    return over || sink_end(flags, (uint32_t)last, k);
}

int ledger_runs_into(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                     long long offset, uint32_t *dst, Py_ssize_t room, Py_ssize_t *n, long long *end) {
    uint32_t *vals = NULL;
    Py_ssize_t nv = 0;
    RunSink k = {dst, room, 0, offset, 0};
    int rc = 0;
    if (flags == 0 && len == 0) { /* no acks (a ledger of delivery counts alone) */
    } else if (flags == 1 && len == 8 && !memcmp(p, EMPTY_ROARING, 8) && 0 <= first && first <= last &&
               last <= U32_MAX_LL) {
        uint32_t none = 0; /* no holes: one run, first..last */
        rc = sink_values(&none, 0, FLAG_HOLES, (uint32_t)first, (uint32_t)last, &k);
    } else if (flags == 16 || flags == 17) { /* a stride of acks, or of holes */
        if (first < 0 || last < first || last > U32_MAX_LL) {
            PyErr_Format(PyExc_ValueError, "the span %lld..%lld is outside 0..%lld", first, last, U32_MAX_LL);
            return -1;
        }
        rc = stride_values(p, len, first, last, &vals, &nv);
        if (rc == 0) rc = sink_values(vals, nv, flags & FLAG_HOLES, (uint32_t)first, (uint32_t)last, &k);
    } else if ((flags & ~FLAG_HOLES) == FLAG_EF || flags == FLAG_BOUNDS) {
        rc = ef_runs_into(flags, first, last, p, len, &k);
    } else {
        rc = record_values(flags, first, last, p, len, &vals, &nv);
        if (rc == 0) rc = sink_values(vals, nv, flags, (uint32_t)first, (uint32_t)last, &k);
    }
    PyMem_Free(vals);
    *n = k.n;
    *end = (long long)k.end;
    return rc;
}

static PyObject *acks_of(long long flags, long long first, long long last, const unsigned char *p, Py_ssize_t len,
                         Py_ssize_t *runs) {
    uint32_t *vals = NULL;
    uint64_t *bounds = NULL;
    Py_ssize_t n = 0, nb = 0;
    PyObject *out = NULL;
    int taken = 0;
    if (record_values(flags, first, last, p, len, &vals, &n) < 0) goto done;
    if (flags == FLAG_BOUNDS) { /* the common case, runs in dense ledgers: their bitsets written straight */
        out = dense_runs(vals, n, (uint32_t)first, (uint32_t)last, &taken);
        if (taken) *runs = n / 2 + 1;
    } else if (flags & FLAG_HOLES) { /* the common case, scattered holes: their bitsets written straight */
        out = dense_holes(vals, n, (uint32_t)first, (uint32_t)last, &taken, runs);
    }
    if (taken || PyErr_Occurred() || bounds_of_code(flags, first, last, vals, n, &bounds, &nb) < 0) goto done;
    *runs = nb / 2;
    out = roaring_of_bounds(bounds, nb);
done:
    PyMem_Free(vals);
    PyMem_Free(bounds);
    return out;
}

/* ef_code(values, first, last) -> bytes: the Elias-Fano code of `values` (a buffer of
 * native-endian uint32, ascending, within first..last, as BitMap.to_array() gives them) that
 * acks_roaring reads (ef_values' layout). ValueError for no values or values out of order or
 * out of the span. O(values + span / 2**L). */
static PyObject *ef_code(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long long first, last;
    Py_buffer raw;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "ef_code(values, first, last)");
        return NULL;
    }
    if (ranged_arg(args[1], "first", 0, U32_MAX_LL, &first) < 0 || ranged_arg(args[2], "last", 0, U32_MAX_LL, &last) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[0], &raw, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *out = NULL;
    unsigned char *buf = NULL;
    Py_ssize_t n = coded_count(&raw);
    if (n < 0) goto done;
    uint64_t span = last >= first ? (uint64_t)(last - first) + 1 : 0;
    if ((uint64_t)n > span) {
        PyErr_SetString(PyExc_ValueError, "values are not ascending within first..last");
        goto done;
    }
    unsigned width = ef_width(span, (uint64_t)n);
    uint64_t low_bytes = ((uint64_t)n * width + 7) / 8, high_bytes = ((uint64_t)n + ((span - 1) >> width) + 1 + 7) / 8;
    unsigned char head[10];
    int head_len = 0;
    for (uint64_t c = (uint64_t)n; ; c >>= 7) {
        head[head_len++] = (unsigned char)((c & 0x7F) | (c >= 0x80 ? 0x80 : 0));
        if (c < 0x80) break;
    }
    Py_ssize_t total = head_len + (Py_ssize_t)(low_bytes + high_bytes);
    if ((buf = (unsigned char *)PyMem_Calloc((size_t)total + 8, 1)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(buf, head, head_len);
    unsigned char *low = buf + head_len, *high = low + low_bytes;
    const unsigned char *src = (const unsigned char *)raw.buf;
    int64_t before = first - 1;
    uint64_t mask = width ? ~0ULL >> (64 - width) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, src + 4 * i, 4);
        if ((int64_t)v <= before || v > last) {
            PyErr_SetString(PyExc_ValueError, "values are not ascending within first..last");
            goto done;
        }
        before = v;
        uint64_t x = v - (uint64_t)first, bit = (uint64_t)i * width, at = (x >> width) + (uint64_t)i;
        for (uint64_t lows = x & mask, b = bit; b < bit + width; b += 8 - (b & 7)) { /* byte by byte */
            low[b >> 3] |= (unsigned char)((lows >> (b - bit)) << (b & 7));
        }
        high[at >> 3] |= (unsigned char)(1u << (at & 7));
    }
    out = PyBytes_FromStringAndSize((const char *)buf, total);
done:
    PyMem_Free(buf);
    PyBuffer_Release(&raw);
    return out;
}

/* ledger_acks(value, rtype, max_version) -> (ledger, acks, runs, owner or None) or None: a
 * ledger record in the fixed envelope read in one pass when it holds acks only (no partial
 * batch, no delivery count) coded as acks_roaring reads them straight from the record (flags
 * 8, 9, 32, 33, 64): its acks in the portable serialization (acks_roaring's bytes), its
 * number of maximal runs, which is the one the record states. None for every other record,
 * damaged or not: records.decode_ledger_owned then reads it the long way and names any damage.
 * pure_codecs.ledger_acks, the same results. */
static PyObject *ledger_acks(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    PyObject *rtype_obj, *max_obj, *result = NULL, *acks;
    long long rtype_ll, max_ll;
    if (!PyArg_ParseTuple(args, "y*OO", &raw, &rtype_obj, &max_obj)) return NULL;
    const unsigned char *p = (const unsigned char *)raw.buf;
    LedgerBody f;
    Py_ssize_t runs;
    if (ranged_arg(rtype_obj, "rtype", 0, 255, &rtype_ll) < 0 || ranged_arg(max_obj, "max_version", 0, 255, &max_ll) < 0)
        goto done;
    if (raw.len < 7 || p[0] != 0xC1 || p[1] != rtype_ll) goto none;
    if (envelope_ok(p, raw.len, max_ll) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto done;
        PyErr_Clear();
        goto none;
    }
    if (read_ledger_body(p + 7, raw.len - 7, &f) < 0 || f.nb || f.nc) goto none;
    if (f.flags != 8 && f.flags != 9 && f.flags != 32 && f.flags != 33 && f.flags != 64) goto none;
    if ((acks = acks_of(f.flags, f.first, f.last, f.payload, f.payload_len, &runs)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto done;
        PyErr_Clear();
        goto none;
    }
    if (runs != f.runs) {
        Py_DECREF(acks);
        goto none;
    }
    if (f.n >= 8)
        result = Py_BuildValue("LNnL", (long long)f.ledger, acks, runs, (long long)f.owner);
    else
        result = Py_BuildValue("LNnO", (long long)f.ledger, acks, runs, Py_None);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&raw);
    return result;
}

/* _ef_simd(on) -> bool: whether Elias-Fano codes are read with vector instructions from now on
 * (SSE2's scan of the high part, ef_highs; AVX2's low parts, ef_lows, where the machine has
 * it), the setting before returned (the tests read codes both ways; False where the build has
 * no SSE2) */
static PyObject *ef_simd_switch(PyObject *self, PyObject *on) {
    (void)self;
    int want = PyObject_IsTrue(on), was = ef_simd;
    if (want < 0) return NULL;
#if defined(__SSE2__)
    ef_simd = want;
#else
    was = 0;
#endif
#ifdef EF_AVX2
    ef_avx2 = want && ef_avx2_machine;
#endif
    return PyBool_FromLong(was);
}

static PyMethodDef methods[] = {
    {"_ef_simd", ef_simd_switch, METH_O, "Whether Elias-Fano codes are read with vector instructions from now on (tests)."},
    {"ledger_acks", ledger_acks, METH_VARARGS, "A ledger record of acks only, read in one pass (or None)."},
    {"acks_roaring", (PyCFunction)(void (*)(void))acks_roaring, METH_FASTCALL,
     "A ledger record's coded values to its acks' portable roaring form, each container its smallest."},
    {"ef_code", (PyCFunction)(void (*)(void))ef_code, METH_FASTCALL,
     "The Elias-Fano code of ascending values within a span (what acks_roaring reads)."},
    {NULL, NULL, 0, NULL},
};

int acks_init(PyObject *module) {
    ef_tables();
    return PyModule_AddFunctions(module, methods);
}
