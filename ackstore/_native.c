/* ackstore._native: the compiled twins of ackstore/storage/pure_codecs.py.
 *
 * Optional: setup.py builds it where a C compiler and the Python headers exist; without
 * it, ackstore/storage/codecs.py uses the pure-Python functions, which return the same
 * bytes and raise the same errors (tests/test_codecs.py runs both on the same cases).
 *
 * Every function here decodes bytes read from a store, so every length and count is
 * checked before it is used: damage raises ValueError, never reads out of bounds.
 *
 * The bitmaps are returned in the portable roaring serialization (the format
 * pyroaring's BitMap.deserialize reads, documented by the RoaringFormatSpec), written
 * with array and bitmap containers only, as CRoaring serializes a bitmap built from
 * values: an array container up to 4,096 values, a bitmap container above.
 */
#include "_native.h"
#include <stdlib.h>
#include <string.h>


/* values: ascending, no repeats. The portable serialization with array and bitmap containers. */
static PyObject *serialize_sorted(const uint32_t *v, Py_ssize_t n) {
    Py_ssize_t containers = 0, i, size;
    for (i = 0; i < n; i++)
        if (i == 0 || (v[i] >> 16) != (v[i - 1] >> 16)) containers++;
    size = 8 + containers * 8;
    /* first pass: the size of each container */
    for (i = 0; i < n;) {
        Py_ssize_t j = i;
        uint32_t key = v[i] >> 16;
        while (j < n && (v[j] >> 16) == key) j++;
        size += (j - i) > ARRAY_MAX ? 8192 : 2 * (j - i);
        i = j;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(out);
    memset(b, 0, size);
    put32(b, COOKIE_NO_RUNS);
    put32(b + 4, (uint32_t)containers);
    unsigned char *head = b + 8, *offsets = b + 8 + 4 * containers;
    Py_ssize_t at = 8 + 8 * containers, c = 0;
    for (i = 0; i < n; c++) {
        Py_ssize_t j = i;
        uint32_t key = v[i] >> 16;
        while (j < n && (v[j] >> 16) == key) j++;
        Py_ssize_t card = j - i;
        put16(head + 4 * c, key);
        put16(head + 4 * c + 2, (uint32_t)(card - 1));
        put32(offsets + 4 * c, (uint32_t)at);
        if (card > ARRAY_MAX) {
            for (Py_ssize_t k = i; k < j; k++) {
                uint32_t low = v[k] & 0xFFFF;
                b[at + (low >> 3)] |= (unsigned char)(1u << (low & 7));
            }
            at += 8192;
        } else {
            for (Py_ssize_t k = i; k < j; k++, at += 2) put16(b + at, v[k] & 0xFFFF);
        }
        i = j;
    }
    return out;
}

/* An int argument in lo..hi, as pure_codecs._ranged checks it: ValueError "NAME=VALUE is
 * outside LO..HI" for any other int (never OverflowError), TypeError for a non-int. */
int ranged_arg(PyObject *obj, const char *name, long long lo, long long hi, long long *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, got %.100s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s=%S is outside %lld..%lld", name, obj, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

#define SSIZE_MAX_LL 9223372036854775807LL

/* positions_by_ledger(items: list | tuple) -> list[(ledger, bytes)] | None
 * Acks' positions grouped per ledger, ascending, each ledger's entries as the portable
 * roaring serialization of them; None (nothing raised) when an item is not a 2-tuple (a
 * Position is one) of ints with the ledger in 0..2**63-1 and the entry in 0..2**32-2: the
 * caller's own checks then say what is wrong.
 *
 * The positions of a ledger that lie together in `items` (a list of one ledger's, or of
 * ledgers one after another: what a consumer acks) are sorted by a radix sort of their
 * entries, O(n); only a list whose ledgers are interleaved is sorted by comparison. */
typedef struct {
    long long ledger;
    uint32_t entry;
    Py_ssize_t item;
} Pos;

static int pos_cmp(const void *a, const void *b) {
    const Pos *x = (const Pos *)a, *y = (const Pos *)b;
    if (x->ledger != y->ledger) return x->ledger < y->ledger ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* v[0..n) ascending, by a least-significant-byte-first radix sort through `tmp` (room for
 * n): a byte every value shares is not a pass. O(n). */
static void sort_entries(uint32_t *v, uint32_t *tmp, Py_ssize_t n) {
    if (n < 64) { /* insertion: fewer steps than the counts below */
        for (Py_ssize_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            Py_ssize_t j = i;
            for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
            v[j] = x;
        }
        return;
    }
    Py_ssize_t counts[4][256];
    memset(counts, 0, sizeof(counts));
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t x = v[i];
        counts[0][x & 0xFF]++;
        counts[1][(x >> 8) & 0xFF]++;
        counts[2][(x >> 16) & 0xFF]++;
        counts[3][x >> 24]++;
    }
    uint32_t *from = v, *to = tmp;
    for (int b = 0; b < 4; b++) {
        Py_ssize_t *c = counts[b], at = 0;
        int shift = 8 * b;
        if (c[(from[0] >> shift) & 0xFF] == n) continue; /* every value has this byte */
        for (int k = 0; k < 256; k++) {
            Py_ssize_t m = c[k];
            c[k] = at;
            at += m;
        }
        for (Py_ssize_t i = 0; i < n; i++) to[c[(from[i] >> shift) & 0xFF]++] = from[i];
        uint32_t *t = from;
        from = to;
        to = t;
    }
    if (from != v) memcpy(v, from, (size_t)n * sizeof(uint32_t));
}

/* a group's entries ascending with no repeats, as serialize_sorted takes them; their number */
static Py_ssize_t unique_sorted(uint32_t *v, uint32_t *tmp, Py_ssize_t n, int sorted) {
    if (!sorted) sort_entries(v, tmp, n);
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i]) v[m++] = v[i];
    return m;
}

/* (ledger, its entries' bytes) appended to out; -1 with an exception */
static int put_group(PyObject *out, PyObject *ledger, const uint32_t *v, Py_ssize_t m) {
    PyObject *raw = serialize_sorted(v, m), *pair = NULL;
    if (raw != NULL) pair = PyTuple_Pack(2, ledger, raw);
    Py_XDECREF(raw);
    int rc = pair == NULL ? -1 : PyList_Append(out, pair);
    Py_XDECREF(pair);
    return rc;
}

static PyObject *positions_by_ledger(PyObject *self, PyObject *items) {
    if (!PyList_Check(items) && !PyTuple_Check(items)) Py_RETURN_NONE;
    PyObject *seq = PySequence_Fast(items, "items");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **it = PySequence_Fast_ITEMS(seq), *out = NULL;
    Pos *pos = PyMem_Malloc((n ? n : 1) * sizeof(Pos));
    uint32_t *vals = PyMem_Malloc((n ? n : 1) * 2 * sizeof(uint32_t)), *tmp = vals + (n ? n : 1);
    int sorted = 1, together = 1; /* ascending; each ledger's positions one after another */
    if (pos == NULL || vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = it[i], *l, *e;
        int over = 0;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) goto none;
        l = PyTuple_GET_ITEM(p, 0);
        e = PyTuple_GET_ITEM(p, 1);
        if (!PyLong_CheckExact(l) || !PyLong_CheckExact(e)) goto none;
        long long ledger = PyLong_AsLongLongAndOverflow(l, &over);
        if (over || ledger < 0) goto none;
        long long entry = PyLong_AsLongLongAndOverflow(e, &over);
        if (over || entry < 0 || entry > U32_MAX_LL - 1) goto none;
        pos[i].ledger = ledger;
        pos[i].entry = (uint32_t)entry;
        pos[i].item = i;
        if (i && pos_cmp(&pos[i - 1], &pos[i]) > 0) {
            sorted = 0;
            together = together && pos[i - 1].ledger <= ledger;
        }
    }
    if (!together) qsort(pos, n, sizeof(Pos), pos_cmp); /* ledgers interleaved: by comparison */
    if ((out = PyList_New(0)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i;
        for (; j < n && pos[j].ledger == pos[i].ledger; j++) vals[j - i] = pos[j].entry;
        Py_ssize_t m = unique_sorted(vals, tmp, j - i, sorted || !together);
        if (put_group(out, PyTuple_GET_ITEM(it[pos[i].item], 0), vals, m) < 0) {
            Py_CLEAR(out);
            goto done;
        }
        i = j;
    }
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(pos);
    PyMem_Free(vals);
    Py_DECREF(seq);
    return out;
}

Py_ssize_t coded_count(const Py_buffer *raw) {
    if (raw->len % 4) {
        PyErr_Format(PyExc_ValueError, "values of %zd bytes are not 32-bit values", raw->len);
        return -1;
    }
    if (raw->len == 0) {
        PyErr_SetString(PyExc_ValueError, "no values to code");
        return -1;
    }
    return raw->len / 4;
}

/* gap_planes(values: buffer of native uint32, first: int) -> bytes: pure_codecs.gap_planes,
 * the gaps between ascending values (the first from `first`) as little-endian uint32 split
 * into their 4 byte planes, low bytes first; ValueError for no values or values not
 * ascending from first. O(n). */
static PyObject *gap_planes(PyObject *self, PyObject *args) {
    Py_buffer raw;
    long long first;
    PyObject *first_obj, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*O", &raw, &first_obj)) return NULL;
    if (ranged_arg(first_obj, "first", 0, U32_MAX_LL, &first) < 0) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    Py_ssize_t n = coded_count(&raw);
    if (n < 0 || (result = PyBytes_FromStringAndSize(NULL, 4 * n)) == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    const unsigned char *p = (const unsigned char *)raw.buf;
    int64_t before = first; /* (the first gap counts from first itself: it may be 0) */
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        if ((int64_t)v < before || (i && (int64_t)v == before)) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "values are not ascending from first");
            goto done;
        }
        uint32_t gap = (uint32_t)((int64_t)v - before);
        out[i] = (unsigned char)gap, out[n + i] = (unsigned char)(gap >> 8);
        out[2 * n + i] = (unsigned char)(gap >> 16), out[3 * n + i] = (unsigned char)(gap >> 24);
        before = v;
    }
done:
    PyBuffer_Release(&raw);
    return result;
}

/* rice_code(values: buffer of native uint32, first: int) -> bytes: bitmaps.py's Rice code of
 * ascending values (k, the count as a varint, then each gap's quotient in unary and k
 * remainder bits, most significant bit first; a quotient of 32 or more is 32 ones and the
 * raw 32-bit gap). The first gap counts from first, the others minus one. */
static PyObject *rice_code(PyObject *self, PyObject *args) {
    Py_buffer raw;
    long long first;
    PyObject *first_obj;
    if (!PyArg_ParseTuple(args, "y*O", &raw, &first_obj)) return NULL;
    if (ranged_arg(first_obj, "first", 0, U32_MAX_LL, &first) < 0) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    PyObject *result = NULL;
    uint32_t *gaps = NULL;
    Py_ssize_t n = coded_count(&raw);
    if (n < 0) goto done;
    if (first < 0 || first > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "values are not ascending from first");
        goto done;
    }
    gaps = (uint32_t *)PyMem_Malloc(n * sizeof(uint32_t));
    if (gaps == NULL) { PyErr_NoMemory(); goto done; }
    const unsigned char *p = (const unsigned char *)raw.buf;
    uint64_t sum = 0;
    int64_t before = first - 1; /* the first gap counts from first: as if first - 1 came before */
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        if ((int64_t)v <= before) {
            PyErr_SetString(PyExc_ValueError, "values are not ascending from first");
            goto done;
        }
        gaps[i] = (uint32_t)((int64_t)v - before - 1);
        sum += gaps[i];
        before = v;
    }
    double mean = (double)sum / (double)n; /* as Python's int / int: both exact in a double */
    unsigned k = 0;
    if (mean >= 2) {
        uint64_t t = (uint64_t)(mean * 0.69);
        unsigned bits = 0;
        while (t) { bits++; t >>= 1; }
        k = bits == 0 ? 0 : bits - 1;
        if (k > 31) k = 31;
    }
    uint64_t width = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t q = gaps[i] >> k;
        width += q >= RICE_ESCAPE ? RICE_ESCAPE + 32 : q + 1 + k;
    }
    unsigned char head[11];
    Py_ssize_t h = 0;
    head[h++] = (unsigned char)k;
    for (uint64_t c = (uint64_t)n; ; c >>= 7) {
        if (c < 0x80) { head[h++] = (unsigned char)c; break; }
        head[h++] = (unsigned char)((c & 0x7F) | 0x80);
    }
    Py_ssize_t body = (Py_ssize_t)((width + 7) / 8);
    result = PyBytes_FromStringAndSize(NULL, h + body);
    if (result == NULL) goto done;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(result);
    memcpy(b, head, h);
    b += h;
    memset(b, 0, body);
    uint64_t at = 0;
#define SET(i) (b[(i) >> 3] |= (unsigned char)(0x80u >> ((i) & 7)))
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t g = gaps[i];
        uint64_t q = g >> k;
        if (q >= RICE_ESCAPE) {
            for (unsigned j = 0; j < RICE_ESCAPE; j++) SET(at + j);
            at += RICE_ESCAPE;
            for (unsigned j = 0; j < 32; j++)
                if ((g >> (31 - j)) & 1u) SET(at + j);
            at += 32;
        } else {
            for (uint64_t j = 0; j < q; j++) SET(at + j);
            at += q + 1;
            for (unsigned j = 0; j < k; j++)
                if ((g >> (k - 1 - j)) & 1u) SET(at + j);
            at += k;
        }
    }
#undef SET
done:
    PyMem_Free(gaps);
    PyBuffer_Release(&raw);
    return result;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int read_fixed_marker(const unsigned char *p, Py_ssize_t len, int version, FixedMarker *m) {
    int with_counts = version >= 7, skip = version >= 9 ? 1 : 0;
    Py_ssize_t pos = 27 + skip, isize = with_counts ? 16 : 14;
    if (len < pos) {
        PyErr_SetString(PyExc_ValueError, "a fixed-layout marker ends early");
        return -1;
    }
    m->flags = skip ? p[1] : 0;
    if (m->flags & ~1u) {
        PyErr_Format(PyExc_ValueError, "a fixed-layout marker's flags 0x%02x are not ones this ackstore writes",
                     m->flags);
        return -1;
    }
    const unsigned char *h = p + skip;
    m->prev = get32(h + 1), m->md_l = get32(h + 5), m->md_e = (long long)get32(h + 9) - 1;
    m->rp_l = get32(h + 13), m->rp_e = (long long)get32(h + 17) - 1, m->cid = get32(h + 21);
    m->n = get16(h + 25);
    m->with_counts = with_counts;
    m->items = p + pos;
    for (uint16_t i = 0; i < m->n; i++) {
        if (len - pos < isize) {
            PyErr_SetString(PyExc_ValueError, "a fixed-layout marker ends early");
            return -1;
        }
        uint32_t ledger = get32(p + pos);
        uint16_t nadds = get16(p + pos + 12), ncounts = with_counts ? get16(p + pos + 14) : 0;
        pos += isize;
        if (len - pos < 4 * (Py_ssize_t)nadds) {
            PyErr_Format(PyExc_ValueError, "a fixed-layout marker's item for ledger %u ends early", ledger);
            return -1;
        }
        pos += 4 * (Py_ssize_t)nadds;
        if (len - pos < 8 * (Py_ssize_t)ncounts) {
            PyErr_Format(PyExc_ValueError, "a fixed-layout marker's counts for ledger %u end early", ledger);
            return -1;
        }
        pos += 8 * (Py_ssize_t)ncounts;
    }
    m->end = pos;
    return 0;
}

const unsigned char *next_fixed_item(const FixedMarker *m, const unsigned char *at, FixedItem *it) {
    it->ledger = get32(at), it->seq = (long long)get32(at + 4) - 1, it->runs = get32(at + 8);
    it->nadds = get16(at + 12), it->ncounts = m->with_counts ? get16(at + 14) : 0;
    it->adds = at + (m->with_counts ? 16 : 14);
    it->counts = it->adds + 4 * (Py_ssize_t)it->nadds;
    return it->counts + 8 * (Py_ssize_t)it->ncounts;
}

/* delta_fields(body: bytes, version: int) -> (flags, prev, md ledger, md entry, rp ledger,
 * rp entry, cursor id, items, end): a fixed-layout marker as format `version` wrote it
 * (read_fixed_marker's). items are (ledger, seq, runs, adds, counts) with seq -1 for a
 * vanished ledger, adds None or the portable roaring bytes of the entries, counts None or
 * {entry: count}; end is where the properties start. */
static PyObject *delta_fields(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *version_obj;
    long long version_ll;
    if (!PyArg_ParseTuple(args, "y*O", &raw, &version_obj)) return NULL;
    if (ranged_arg(version_obj, "version", 0, 255, &version_ll) < 0) {
        PyBuffer_Release(&raw);
        return NULL;
    }
    PyObject *items = NULL, *result = NULL, *counts = NULL;
    uint32_t *adds = NULL;
    FixedMarker m;
    if (read_fixed_marker((const unsigned char *)raw.buf, raw.len, (int)version_ll, &m) < 0) goto done;
    items = PyList_New(m.n);
    if (items == NULL) goto done;
    const unsigned char *at = m.items;
    for (uint16_t i = 0; i < m.n; i++) {
        FixedItem it;
        at = next_fixed_item(&m, at, &it);
        PyObject *set;
        if (it.nadds) {
            adds = (uint32_t *)PyMem_Malloc(it.nadds * sizeof(uint32_t));
            if (adds == NULL) { PyErr_NoMemory(); goto done; }
            Py_ssize_t n = sorted_adds(&it, adds);
            set = serialize_sorted(adds, n);
            PyMem_Free(adds);
            adds = NULL;
            if (set == NULL) goto done;
        } else {
            set = Py_NewRef(Py_None);
        }
        if (it.ncounts) {
            counts = PyDict_New();
            if (counts == NULL) { Py_DECREF(set); goto done; }
            for (uint16_t k = 0; k < it.ncounts; k++) {
                const unsigned char *c = it.counts + 8 * k;
                PyObject *e = PyLong_FromUnsignedLong(get32(c)), *n = PyLong_FromUnsignedLong(get32(c + 4));
                int bad = e == NULL || n == NULL || PyDict_SetItem(counts, e, n) < 0;
                Py_XDECREF(e);
                Py_XDECREF(n);
                if (bad) { Py_DECREF(set); goto done; }
            }
        } else {
            counts = Py_NewRef(Py_None);
        }
        PyObject *item = Py_BuildValue("(kLkNN)", (unsigned long)it.ledger, it.seq, (unsigned long)it.runs, set, counts);
        counts = NULL;
        if (item == NULL) goto done;
        PyList_SET_ITEM(items, i, item);
    }
    result = Py_BuildValue("(IkkLkLkOn)", m.flags, (unsigned long)m.prev, (unsigned long)m.md_l, m.md_e,
                           (unsigned long)m.rp_l, m.rp_e, (unsigned long)m.cid, items, m.end);
done:
    PyMem_Free(adds);
    Py_XDECREF(counts);
    Py_XDECREF(items);
    PyBuffer_Release(&raw);
    return result;
}

Py_ssize_t sorted_adds(const FixedItem *it, uint32_t *out) {
    for (uint16_t a = 0; a < it->nadds; a++) out[a] = get32(it->adds + 4 * a);
    qsort(out, it->nadds, sizeof(uint32_t), cmp_u32);
    Py_ssize_t m = 0;
    for (uint16_t a = 0; a < it->nadds; a++)
        if (m == 0 || out[m - 1] != out[a]) out[m++] = out[a];
    return m;
}

int mp_int(mp_reader *m, int64_t *out) {
    if (m->p >= m->end) return -1;
    unsigned c = *m->p++;
    if (c <= 0x7f) { *out = c; return 0; }
    if (c >= 0xe0) { *out = (int64_t)(int8_t)c; return 0; }
    int n, sign;
    if (c >= 0xcc && c <= 0xcf) { n = 1 << (c - 0xcc); sign = 0; }
    else if (c >= 0xd0 && c <= 0xd3) { n = 1 << (c - 0xd0); sign = 1; }
    else return -1;
    if (m->end - m->p < n) return -1;
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | m->p[i];
    m->p += n;
    if (!sign) {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    } else {
        *out = n == 1 ? (int64_t)(int8_t)v : n == 2 ? (int64_t)(int16_t)v : n == 4 ? (int64_t)(int32_t)v : (int64_t)v;
    }
    return 0;
}

int mp_length(mp_reader *m, int bytes, uint32_t *out) {
    if (m->end - m->p < bytes) return -1;
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | m->p[i];
    m->p += bytes;
    *out = v;
    return 0;
}

int mp_array(mp_reader *m, uint32_t *n) {
    if (m->p >= m->end) return -1;
    unsigned c = *m->p++;
    if (c >= 0x90 && c <= 0x9f) { *n = c & 0x0f; return 0; }
    if (c == 0xdc) return mp_length(m, 2, n);
    if (c == 0xdd) return mp_length(m, 4, n);
    return -1;
}

static int mp_bin(mp_reader *m, const unsigned char **at, Py_ssize_t *len) {
    if (m->p >= m->end) return -1;
    unsigned c = *m->p++;
    if (c < 0xc4 || c > 0xc6) return -1;
    uint32_t n;
    if (mp_length(m, 1 << (c - 0xc4), &n) < 0 || (uint64_t)(m->end - m->p) < n) return -1;
    *at = m->p;
    *len = (Py_ssize_t)n;
    m->p += n;
    return 0;
}

#define LEDGER_SHAPE \
    "a ledger record's body is not [ledger, flags, first, last, payload, runs, batches(, owner(, counts))]"


int read_ledger_body(const unsigned char *body, Py_ssize_t len, LedgerBody *f) {
    mp_reader m = {body, body + len};
    int64_t entry, size;
    f->owner = 0;
    f->nc = 0;
    f->counts = f->end = body + len;
    int ok = mp_array(&m, &f->n) == 0 && f->n >= 7 && f->n <= 9 && mp_int(&m, &f->ledger) == 0 &&
             mp_int(&m, &f->flags) == 0 && mp_int(&m, &f->first) == 0 && mp_int(&m, &f->last) == 0 &&
             mp_bin(&m, &f->payload, &f->payload_len) == 0 && mp_int(&m, &f->runs) == 0 && mp_array(&m, &f->nb) == 0;
    if (ok) {
        f->low = f->last >= f->first ? f->first : (int64_t)1 << 32;
        f->high = f->last >= f->first ? f->last : -1;
    }
    for (uint32_t i = 0; ok && i < f->nb; i++) {
        uint32_t three;
        const unsigned char *mask;
        Py_ssize_t mask_len;
        ok = mp_array(&m, &three) == 0 && three == 3 && mp_int(&m, &entry) == 0 && mp_int(&m, &size) == 0 &&
             mp_bin(&m, &mask, &mask_len) == 0;
        if (ok) {
            f->low = entry < f->low ? entry : f->low;
            f->high = entry > f->high ? entry : f->high;
        }
    }
    if (ok && f->n >= 8) ok = mp_int(&m, &f->owner) == 0;
    if (ok && f->n == 9) {
        ok = mp_array(&m, &f->nc) == 0;
        f->counts = m.p;
        for (uint32_t i = 0; ok && i < f->nc; i++) {
            int64_t x;
            ok = mp_int(&m, &x) == 0;
            if (ok && i % 2 == 0) {
                f->low = x < f->low ? x : f->low;
                f->high = x > f->high ? x : f->high;
            }
        }
    }
    f->end = m.end;
    return ok && m.p == m.end ? 0 : -1;
}

int ledger_count_items(const LedgerBody *f, int64_t *out) {
    mp_reader m = {f->counts, f->end};
    for (uint32_t i = 0; i < f->nc; i++)
        if (mp_int(&m, &out[i]) < 0) return -1;
    return 0;
}

/* (ledger, lowest, highest, runs, owner or None) of a ledger record's body: pure_codecs.ledger_fields. */
static PyObject *fields_of(const unsigned char *body, Py_ssize_t len) {
    LedgerBody f;
    if (read_ledger_body(body, len, &f) < 0) {
        PyErr_SetString(PyExc_ValueError, LEDGER_SHAPE);
        return NULL;
    }
    if (f.n >= 8)
        return Py_BuildValue("LLLLL", (long long)f.ledger, (long long)f.low, (long long)f.high, (long long)f.runs,
                             (long long)f.owner);
    return Py_BuildValue("LLLLO", (long long)f.ledger, (long long)f.low, (long long)f.high, (long long)f.runs, Py_None);
}

/* ledger_fields(body): fields_of. */
static PyObject *ledger_fields(PyObject *self, PyObject *args) {
    Py_buffer raw;
    if (!PyArg_ParseTuple(args, "y*", &raw)) return NULL;
    PyObject *result = fields_of((const unsigned char *)raw.buf, raw.len);
    PyBuffer_Release(&raw);
    return result;
}

/* zlib's CRC-32 (zlib.crc32(data, crc)): on x86-64 where the CPU has the carry-less multiply
 * (PCLMULQDQ), 64 bytes and more folded 16 bytes at a time (crc_fold); else by tables for
 * short data (eight bytes a step: "slicing by eight") and by zlib itself, through Python's
 * zlib module, for long data (faster there; no zlib headers needed). */
static uint32_t crc_table[8][256];
static PyObject *zlib_crc32;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CRC_FOLDS 1
/* whether crc32_of folds with PCLMULQDQ: the CPU has it (crc_init asks), and _crc_folds leaves it on */
static int crc_folds;

/* The CRC-32 state `state` (the running value, inverted as zlib keeps it) carried over `len`
 * bytes at p (64 or more, a multiple of 16): four 16-byte lanes folded over every 64 bytes by
 * x^(512 + 32) and x^512 modulo the polynomial, reflected, then into one lane by x^(128 + 32)
 * and x^128 with each 16 bytes left, and reduced to 32 bits (128 to 64 bits, 64 to 32 by
 * x^64, then a Barrett reduction). The constants are the polynomial's (0x04C11DB7, reflected:
 * each 33 bits, a power of x modulo it, bit-reflected and shifted one). O(len). */
__attribute__((target("pclmul,sse2"))) static uint32_t crc_fold(uint32_t state, const unsigned char *p, size_t len) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL), k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL), poly = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p), x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32)), x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64, len -= 64;
    /* x folded by the pair of constants c (its low half by c's low, its high by c's high), then next added */
#define CRC_FOLD(x, c, next) \
    _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, c, 0x00), _mm_clmulepi64_si128(x, c, 0x11)), next)
    for (; len >= 64; p += 64, len -= 64) {
        x1 = CRC_FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        x2 = CRC_FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = CRC_FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = CRC_FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x1 = CRC_FOLD(CRC_FOLD(CRC_FOLD(x1, k3k4, x2), k3k4, x3), k3k4, x4);
    for (; len >= 16; p += 16, len -= 16) x1 = CRC_FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
#undef CRC_FOLD
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x10), _mm_srli_si128(x1, 8));               /* 128 -> 64 bits */
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), _mm_srli_si128(x1, 4)); /* -> 64 - 32 */
    __m128i t = x1; /* Barrett: the quotient's estimate by u = x^64 / P, its multiple of P taken off */
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x00), t);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x1, 4));
}
#endif

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t n = 0; n < 256; n++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xFF];
#ifdef CRC_FOLDS
    crc_folds = __builtin_cpu_supports("pclmul");
#endif
}

/* -1 with an exception set when zlib fails (it cannot for a buffer). */
int64_t crc32_of(const unsigned char *p, Py_ssize_t n, uint32_t crc) {
#ifdef CRC_FOLDS
    if (n >= 64 && crc_folds) { /* the whole 16-byte lanes folded, the rest by the tables */
        Py_ssize_t whole = n & ~(Py_ssize_t)15;
        crc = ~crc_fold(~crc, p, (size_t)whole);
        p += whole, n -= whole;
    } else
#endif
    if (n > 512 && zlib_crc32 != NULL) {
        PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
        if (view == NULL) return -1;
        PyObject *r = PyObject_CallFunction(zlib_crc32, "OI", view, (unsigned int)crc);
        Py_DECREF(view);
        if (r == NULL) return -1;
        unsigned long v = PyLong_AsUnsignedLong(r);
        Py_DECREF(r);
        return PyErr_Occurred() ? -1 : (int64_t)v;
    }
    crc = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t one = crc ^ get32(p), two = get32(p + 4);
        crc = crc_table[7][one & 0xFF] ^ crc_table[6][(one >> 8) & 0xFF] ^ crc_table[5][(one >> 16) & 0xFF] ^
              crc_table[4][one >> 24] ^ crc_table[3][two & 0xFF] ^ crc_table[2][(two >> 8) & 0xFF] ^
              crc_table[1][(two >> 16) & 0xFF] ^ crc_table[0][two >> 24];
    }
    for (Py_ssize_t i = 0; i < n; i++) crc = crc_table[0][(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* _crc32(data, value=0) -> int: crc32_of, as zlib.crc32(data, value) (the tests compare them) */
static PyObject *crc32_call(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &value)) return NULL;
    int64_t crc = crc32_of((const unsigned char *)data.buf, data.len, value);
    PyBuffer_Release(&data);
    return crc < 0 ? NULL : PyLong_FromUnsignedLong((unsigned long)crc);
}

/* _crc_folds(on) -> bool: whether crc32_of folds with PCLMULQDQ from now on, where the CPU has
 * it; the setting before returned (False where it never does) */
static PyObject *crc_folds_switch(PyObject *self, PyObject *on) {
    (void)self;
    int want = PyObject_IsTrue(on);
    if (want < 0) return NULL;
#ifdef CRC_FOLDS
    int was = crc_folds;
    crc_folds = want && __builtin_cpu_supports("pclmul");
    return PyBool_FromLong(was);
#else
    return PyBool_FromLong(0);
#endif
}

Py_ssize_t slot_head_len(unsigned long long seq, Py_ssize_t reserve) {
    Py_ssize_t n = 1;
    for (; seq > 0x7F; seq >>= 7) n++;
    return n + 4 + reserve;
}

void put_slot_key(unsigned char *key, unsigned long long cid, int slot) {
    key[0] = 0xFF;
    key[1] = (unsigned char)slot;
    for (int i = 0; i < 8; i++) key[2 + i] = (unsigned char)(cid >> (56 - 8 * i));
}

void put_slot_head(unsigned char *key, unsigned char *v, unsigned long long cid, int slot, unsigned long long seq,
                   Py_ssize_t reserve) {
    unsigned char head[20]; /* the key, then the sequence's varint: what the check covers */
    Py_ssize_t h = 10;
    put_slot_key(head, cid, slot);
    for (; seq > 0x7F; seq >>= 7) head[h++] = (unsigned char)(seq & 0x7F) | 0x80;
    head[h++] = (unsigned char)seq;
    uint32_t crc = (uint32_t)crc32_of(head, h, 0); /* short: never through zlib, never fails */
    memcpy(key, head, 10);
    memcpy(v, head + 10, h - 10);
    v += h - 10;
    v[0] = (unsigned char)(crc >> 24), v[1] = (unsigned char)(crc >> 16), v[2] = (unsigned char)(crc >> 8);
    v[3] = (unsigned char)crc;
    memset(v + 4, 0, (size_t)reserve);
}

/* records.slot_key and records.seal_slot at once: the key of cursor `cid`'s state slot
 * `slot` (*key_out, a new reference) and the value holding `record`, the state marker of
 * sequence `seq`, after `reserve` zero bytes and its padding (slot_padding) (returned);
 * NULL with an exception set (nothing in *key_out) */
PyObject *sealed_slot(unsigned long long cid, int slot, unsigned long long seq, PyObject *record,
                      Py_ssize_t reserve, PyObject **key_out) {
    if (!PyBytes_Check(record)) {
        PyErr_SetString(PyExc_TypeError, "a state slot holds a bytes record");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(record), h = slot_head_len(seq, reserve);
    reserve += slot_padding(h - reserve + n), h = slot_head_len(seq, reserve);
    PyObject *value = PyBytes_FromStringAndSize(NULL, h + n), *key = NULL;
    if (value == NULL) return NULL;
    unsigned char k[10], *v = (unsigned char *)PyBytes_AS_STRING(value);
    put_slot_head(k, v, cid, slot, seq, reserve);
    memcpy(v + h, PyBytes_AS_STRING(record), n);
    if ((key = PyBytes_FromStringAndSize((const char *)k, 10)) == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    *key_out = key;
    return value;
}

/* The fixed envelope of a record (format 6 on) checked in this order: its length, a version
 * up to `max_version`, its checksum (the tag is the caller's to look at): 0, or -1 with the
 * ValueError pure_codecs.open_envelope raises. */
int envelope_ok(const unsigned char *p, Py_ssize_t len, long long max_version) {
    if (len < 7) {
        PyErr_Format(PyExc_ValueError, "record of %zd bytes is shorter than its envelope", len);
        return -1;
    }
    if (p[2] > max_version) {
        PyErr_Format(PyExc_ValueError, "record format %d is newer than this ackstore reads (%lld)", p[2], max_version);
        return -1;
    }
    int64_t crc = crc32_of(p + 7, len - 7, (uint32_t)p[1] << 8 | p[2]);
    if (crc < 0) return -1; /* the exception is set */
    if ((uint32_t)crc != get32(p + 3)) {
        PyErr_SetString(PyExc_ValueError, "record checksum mismatch");
        return -1;
    }
    return 0;
}

/* open_envelope(value, max_version) -> (type, version, body bytes) of a record in the fixed
 * envelope (envelope_ok): pure_codecs.open_envelope, the same results and errors. */
static PyObject *open_envelope(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    PyObject *max_obj, *result = NULL;
    long long max_ll;
    if (!PyArg_ParseTuple(args, "y*O", &raw, &max_obj)) return NULL;
    const unsigned char *p = (const unsigned char *)raw.buf;
    if (ranged_arg(max_obj, "max_version", 0, 255, &max_ll) == 0 && envelope_ok(p, raw.len, max_ll) == 0)
        result = Py_BuildValue("(iiy#)", p[1], p[2], (const char *)p + 7, raw.len - 7);
    PyBuffer_Release(&raw);
    return result;
}

/* the body of a record of type `rtype` in the fixed envelope at p (len bytes), its envelope
 * and checksum checked first; NULL with a ValueError saying what failed (`other`: of another
 * type, formatted with it) */
static const unsigned char *fixed_body(const unsigned char *p, Py_ssize_t len, long long max_version, long long rtype,
                                       const char *other) {
    if (len < 1 || p[0] != 0xC1) {
        PyErr_SetString(PyExc_ValueError, "record is not in the fixed envelope");
        return NULL;
    }
    if (envelope_ok(p, len, max_version) < 0) return NULL;
    if (p[1] != rtype) {
        PyErr_Format(PyExc_ValueError, other, p[1]);
        return NULL;
    }
    return p + 7;
}

/* ledger_span(value, rtype, max_version) -> ledger_fields of a record in the fixed
 * envelope, its envelope and checksum checked first: pure_codecs.ledger_span. */
static PyObject *ledger_span(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *rtype_obj, *max_obj;
    long long rtype_ll, max_ll;
    if (!PyArg_ParseTuple(args, "y*OO", &raw, &rtype_obj, &max_obj)) return NULL;
    PyObject *result = NULL;
    if (ranged_arg(rtype_obj, "rtype", 0, 255, &rtype_ll) == 0 && ranged_arg(max_obj, "max_version", 0, 255, &max_ll) == 0) {
        const unsigned char *body =
            fixed_body(raw.buf, raw.len, max_ll, rtype_ll, "expected a ledger record, found type %d");
        if (body != NULL) result = fields_of(body, raw.len - 7);
    }
    PyBuffer_Release(&raw);
    return result;
}

#define CURSOR_SHAPE "a cursor entry's body is not [topic id, name, cursor id, config map]"

/* the fields of a cursors catalog entry's body at p (len bytes), as cursor_fields gives them */
static PyObject *cursor_fields_of(const unsigned char *p, Py_ssize_t len_body) {
    mp_reader m = {p, p + len_body};
    uint32_t n, len = 0;
    int64_t tid, cid;
    PyObject *result = NULL, *name = NULL;
    int ok = mp_array(&m, &n) == 0 && n == 4 && mp_int(&m, &tid) == 0 && m.p < m.end;
    if (ok) {
        unsigned c = *m.p++;
        ok = (c >= 0xa0 && c <= 0xbf && ((len = c & 0x1f), 1)) || (c == 0xd9 && mp_length(&m, 1, &len) == 0) ||
             (c == 0xda && mp_length(&m, 2, &len) == 0) || (c == 0xdb && mp_length(&m, 4, &len) == 0);
        ok = ok && (uint64_t)(m.end - m.p) >= len;
    }
    if (ok) {
        name = PyUnicode_DecodeUTF8((const char *)m.p, len, "strict");
        if (name == NULL) PyErr_Clear();
        ok = name != NULL;
        m.p += len;
    }
    ok = ok && mp_int(&m, &cid) == 0 && m.p < m.end && ((*m.p >= 0x80 && *m.p <= 0x8f) || *m.p == 0xde || *m.p == 0xdf);
    if (ok)
        result = Py_BuildValue("LOLy#", (long long)tid, name, (long long)cid, (const char *)m.p, (Py_ssize_t)(m.end - m.p));
    else
        PyErr_SetString(PyExc_ValueError, CURSOR_SHAPE);
    Py_XDECREF(name);
    return result;
}

/* cursor_fields(body) -> (topic id, name, cursor id, config map bytes): a cursors catalog
 * entry's body read without decoding its configuration: the map's bytes, which end the body
 * (configurations repeat, so the caller decodes each distinct one once). ValueError
 * (CURSOR_SHAPE) unless the body is [64-bit int, UTF-8 str, 64-bit int, map...]:
 * pure_codecs.cursor_fields. */
static PyObject *cursor_fields(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    if (!PyArg_ParseTuple(args, "y*", &raw)) return NULL;
    PyObject *result = cursor_fields_of((const unsigned char *)raw.buf, raw.len);
    PyBuffer_Release(&raw);
    return result;
}

/* cursor_entry(value, max_version) -> cursor_fields of a cursors catalog entry in the fixed
 * envelope (type RECORD_CURSOR), its envelope and checksum checked first:
 * pure_codecs.cursor_entry. */
static PyObject *cursor_entry(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer raw;
    PyObject *max_obj, *result = NULL;
    long long max_ll;
    if (!PyArg_ParseTuple(args, "y*O", &raw, &max_obj)) return NULL;
    if (ranged_arg(max_obj, "max_version", 0, 255, &max_ll) == 0) {
        const unsigned char *body = fixed_body(raw.buf, raw.len, max_ll, RECORD_CURSOR, "type %d, not a cursor entry");
        if (body != NULL) result = cursor_fields_of(body, raw.len - 7);
    }
    PyBuffer_Release(&raw);
    return result;
}

/* The key and value of `item`, a (key, value) pair of bytes an LMDB cursor yields (borrowed);
 * -1 with TypeError naming the scan `who` read it when it is not one. */
static int bytes_pair(PyObject *item, PyObject **key, PyObject **value, const char *who) {
    if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 && PyBytes_Check(*key = PyTuple_GET_ITEM(item, 0)) &&
        PyBytes_Check(*value = PyTuple_GET_ITEM(item, 1)))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s reads (key, value) pairs of bytes", who);
    return -1;
}

/* The cursors entry (key, value) read into `found` as (name, cursor id, config map bytes,
 * value): 1 when it is in the fixed envelope, checks, and is stored under its own key (the
 * topic's 8-byte `prefix`, then its name's UTF-8 bytes, at most `most_name` of them); 0 when
 * not (the caller reads it: a msgpack envelope, a hashed name, damage); -1 on MemoryError. */
static int scan_cursor(PyObject *key, PyObject *value, const char *prefix, long long max_version, long long most_name,
                       PyObject *found) {
    const unsigned char *v = (const unsigned char *)PyBytes_AS_STRING(value);
    Py_ssize_t vlen = PyBytes_GET_SIZE(value), klen = PyBytes_GET_SIZE(key);
    const unsigned char *body = vlen >= 1 && v[0] == 0xC1 ? fixed_body(v, vlen, max_version, RECORD_CURSOR, "%d") : NULL;
    PyObject *fields = body == NULL ? NULL : cursor_fields_of(body, vlen - 7);
    if (fields == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) return -1;
        PyErr_Clear();
        return 0;
    }
    long long tid = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 0)), cid = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 2));
    Py_ssize_t nlen = 0;
    const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(fields, 1), &nlen);
    unsigned char want[8];
    for (int i = 0; i < 8; i++) want[i] = (unsigned char)((unsigned long long)tid >> (56 - 8 * i));
    int ok = !PyErr_Occurred() && name != NULL && cid >= 0 && nlen <= most_name && klen == 8 + nlen &&
             !memcmp(want, prefix, 8) && !memcmp(PyBytes_AS_STRING(key) + 8, name, (size_t)nlen);
    PyErr_Clear();
    PyObject *item = ok ? PyTuple_Pack(4, PyTuple_GET_ITEM(fields, 1), PyTuple_GET_ITEM(fields, 2),
                                       PyTuple_GET_ITEM(fields, 3), value)
                        : NULL;
    Py_DECREF(fields);
    if (!ok) return 0;
    int rc = item == NULL ? -1 : PyList_Append(found, item);
    Py_XDECREF(item);
    return rc < 0 ? -1 : 1;
}

/* scan_cursors(items, prefix, max_version, most_name) -> (found, stop): a topic's cursors
 * entries, (key, value) pairs of bytes from `items` until a key without the topic's 8-byte
 * `prefix`: found, [(name, cursor id, config map bytes, value)] of those read here
 * (scan_cursor's), in their order; stop, the first pair it leaves to the caller (who reads
 * it, then scans on with the same items), or None when the topic's entries ended.
 * pure_codecs.scan_cursors. */
static PyObject *scan_cursors(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *items, *max_obj, *most_obj, *iter = NULL, *item = NULL, *found = NULL, *stop = Py_None, *result = NULL;
    Py_buffer prefix;
    long long max_ll, most_ll;
    if (!PyArg_ParseTuple(args, "Oy*OO", &items, &prefix, &max_obj, &most_obj)) return NULL;
    if (ranged_arg(max_obj, "max_version", 0, 255, &max_ll) < 0 ||
        ranged_arg(most_obj, "most_name", 0, 1 << 20, &most_ll) < 0)
        goto done;
    if (prefix.len != 8) {
        PyErr_Format(PyExc_ValueError, "prefix of %zd bytes is not allowed: a topic's is 8", prefix.len);
        goto done;
    }
    if ((iter = PyObject_GetIter(items)) == NULL || (found = PyList_New(0)) == NULL) goto done;
    while ((item = PyIter_Next(iter)) != NULL) {
        PyObject *key, *value;
        if (bytes_pair(item, &key, &value, "scan_cursors") < 0) goto done;
        if (PyBytes_GET_SIZE(key) < 8 || memcmp(PyBytes_AS_STRING(key), prefix.buf, 8)) break;
        int rc = scan_cursor(key, value, prefix.buf, max_ll, most_ll, found);
        if (rc < 0) goto done;
        if (rc == 0) {
            stop = item;
            item = NULL;
            break;
        }
        Py_CLEAR(item);
    }
    if (!PyErr_Occurred()) result = PyTuple_Pack(2, found, stop);
done:
    if (stop != Py_None) Py_DECREF(stop);
    Py_XDECREF(item);
    Py_XDECREF(found);
    Py_XDECREF(iter);
    PyBuffer_Release(&prefix);
    return result;
}

/* Where a walk of a portable roaring serialization puts what it reads: each value
 * (`lasts` NULL) or each maximal run (`firsts`, `lasts`), ascending, in PyMem buffers of
 * `cap` entries (the set's cardinality: never outgrown). */
typedef struct {
    uint32_t *firsts, *lasts;
    Py_ssize_t n, cap;
} Sink;

/* The values lo..hi (ascending after everything before): -1 if they are not. */
static inline int sink_range(Sink *k, uint32_t lo, uint32_t hi) {
    if (k->n) {
        uint32_t last = k->lasts != NULL ? k->lasts[k->n - 1] : k->firsts[k->n - 1];
        if (lo <= last) return -1;
        if (k->lasts != NULL && lo == last + 1) {
            k->lasts[k->n - 1] = hi;
            return 0;
        }
    }
    if (k->lasts != NULL) {
        k->firsts[k->n] = lo;
        k->lasts[k->n++] = hi;
    } else {
        for (uint64_t x = lo; x <= hi; x++) k->firsts[k->n++] = (uint32_t)x;
    }
    return 0;
}

/* The values (or runs) of a portable roaring serialization (RoaringFormatSpec: array,
 * bitmap and run containers; what pyroaring's serialize() writes), ascending, into a Sink
 * whose buffers this allocates (the caller frees them). Returns their number, or -1 with
 * ValueError when the bytes are not one. */
static Py_ssize_t roaring_walk(const unsigned char *p, Py_ssize_t len, Sink *k, int runs_wanted) {
    k->firsts = k->lasts = NULL;
    k->n = k->cap = 0;
    if (len < 4) goto bad;
    uint32_t cookie = get32(p), size;
    Py_ssize_t pos = 4;
    const unsigned char *runs = NULL;
    int offsets;
    if ((cookie & 0xFFFF) == COOKIE_RUNS) {
        size = (cookie >> 16) + 1;
        runs = p + pos;
        pos += (size + 7) / 8;
        offsets = size >= 4;
    } else if (cookie == COOKIE_NO_RUNS) {
        if (len < 8) goto bad;
        size = get32(p + 4);
        pos = 8;
        offsets = 1;
    } else {
        goto bad;
    }
    if (size > 65536 || len - pos < 4 * (Py_ssize_t)size) goto bad;
    const unsigned char *head = p + pos;
    pos += 4 * (Py_ssize_t)size + (offsets ? 4 * (Py_ssize_t)size : 0);
    if (pos > len) goto bad;
    Py_ssize_t total = 0;
    for (uint32_t c = 0; c < size; c++) total += (Py_ssize_t)get16(head + 4 * c + 2) + 1;
    k->cap = total ? total : 1;
    k->firsts = (uint32_t *)PyMem_Malloc(k->cap * sizeof(uint32_t));
    if (runs_wanted) k->lasts = (uint32_t *)PyMem_Malloc(k->cap * sizeof(uint32_t));
    if (k->firsts == NULL || (runs_wanted && k->lasts == NULL)) {
        PyMem_Free(k->firsts);
        PyMem_Free(k->lasts);
        k->firsts = k->lasts = NULL;
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t c = 0; c < size; c++) {
        uint32_t key = (uint32_t)get16(head + 4 * c) << 16, card = (uint32_t)get16(head + 4 * c + 2) + 1;
        if (runs != NULL && (runs[c / 8] >> (c % 8)) & 1) {
            if (len - pos < 2) goto bad;
            uint32_t nruns = get16(p + pos), got = 0;
            pos += 2;
            if (len - pos < 4 * (Py_ssize_t)nruns) goto bad;
            for (uint32_t r = 0; r < nruns; r++, pos += 4) {
                uint32_t start = get16(p + pos), length = get16(p + pos + 2);
                if (start + length > 0xFFFF || got + length + 1 > card) goto bad;
                if (sink_range(k, key | start, key | (start + length)) < 0) goto bad;
                got += length + 1;
            }
            if (got != card) goto bad;
        } else if (card > ARRAY_MAX) {
            if (len - pos < 8192) goto bad;
            uint32_t got = 0;
            for (uint32_t w = 0; w < 8192 && got <= card; w++) {
                unsigned char byte = p[pos + w];
                for (int bit = 0; byte && bit < 8; bit++, byte >>= 1)
                    if (byte & 1) {
                        if (++got > card) goto bad;
                        uint32_t x = key | (w * 8 + bit);
                        if (sink_range(k, x, x) < 0) goto bad;
                    }
            }
            if (got != card) goto bad;
            pos += 8192;
        } else {
            if (len - pos < 2 * (Py_ssize_t)card) goto bad;
            for (uint32_t i = 0; i < card; i++) {
                uint32_t x = key | get16(p + pos + 2 * i);
                if (sink_range(k, x, x) < 0) goto bad;
            }
            pos += 2 * (Py_ssize_t)card;
        }
    }
    return k->n;
bad:
    PyMem_Free(k->firsts);
    PyMem_Free(k->lasts);
    k->firsts = k->lasts = NULL;
    PyErr_SetString(PyExc_ValueError, "not a portable roaring serialization");
    return -1;
}


static PyObject *s_serialize; /* "serialize", interned at import */

/* A bitmap's values or runs (its serialize(), read by roaring_walk); the count, or -1. */
static Py_ssize_t bitmap_walk(PyObject *bitmap, Sink *k, int runs_wanted) {
    k->firsts = k->lasts = NULL;
    PyObject *raw = PyObject_CallMethodNoArgs(bitmap, s_serialize);
    if (raw == NULL) return -1;
    if (!PyBytes_Check(raw)) {
        Py_DECREF(raw);
        PyErr_SetString(PyExc_TypeError, "a bitmap's serialize() did not return bytes");
        return -1;
    }
    Py_ssize_t n = roaring_walk((const unsigned char *)PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), k, runs_wanted);
    Py_DECREF(raw);
    return n;
}

/* A bitmap's values, ascending, in a PyMem buffer the caller frees; their number, or -1. */
static Py_ssize_t bitmap_values(PyObject *bitmap, uint32_t **out) {
    Sink k;
    Py_ssize_t n = bitmap_walk(bitmap, &k, 0);
    *out = k.firsts;
    return n;
}

/* fixed_marker(version, flags, prev, md_l, md_e, rp_l, rp_e, cursor_id, items, properties)
 * -> bytes: a whole marker record in the fixed envelope and layout, pure_codecs.fixed_marker
 * (the same bytes; OverflowError with the same message when a field does not fit). */
#define OUTSIDE_LAYOUT \
    "a marker field is not an unsigned int the fixed layout holds (32 bits; 16 for counts of items)"

/* whether v is the int -1 */
static int minus_one(PyObject *v) {
    int overflow;
    return PyLong_CheckExact(v) && PyLong_AsLongLongAndOverflow(v, &overflow) == -1 && !overflow && !PyErr_Occurred();
}

/* An int in [0, most] once `add` is added, or -1 with OverflowError set. */
static int field_of(PyObject *v, long long add, long long most, uint32_t *out) {
    if (!PyLong_Check(v)) goto outside;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); goto outside; }
    if (x > most - add || x < -add) goto outside;
    *out = (uint32_t)(x + add);
    return 0;
outside:
    PyErr_SetString(PyExc_OverflowError, OUTSIDE_LAYOUT);
    return -1;
}

#define U32 0xFFFFFFFFLL
#define U16 0xFFFFLL

/* One item's adds: the values of `adds` not in `named` (a bitmap, or NULL), appended as
 * u32; their number in *count (at most 65,535, else OverflowError). O(adds + named). */
static int put_adds(Out *o, PyObject *adds, PyObject *named, uint32_t *count) {
    uint32_t *v = NULL, *w = NULL;
    Py_ssize_t n = bitmap_values(adds, &v), m = 0, k = 0;
    int rc = -1;
    if (n < 0) goto done;
    if (named != NULL && (m = bitmap_values(named, &w)) < 0) goto done;
    unsigned char *room = out_room(o, 4 * n);
    if (room == NULL) goto done;
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        while (j < m && w[j] < v[i]) j++;
        if (j < m && w[j] == v[i]) continue;
        put32(room + 4 * k++, v[i]);
    }
    o->len -= 4 * (n - k);
    if (k > U16) { PyErr_SetString(PyExc_OverflowError, OUTSIDE_LAYOUT); goto done; }
    *count = (uint32_t)k;
    rc = 0;
done:
    PyMem_Free(v);
    PyMem_Free(w);
    return rc;
}

static int put_counts(Out *o, PyObject *counts) {
    PyObject *keys = PyDict_Keys(counts);
    if (keys == NULL || PyList_Sort(keys) < 0) { Py_XDECREF(keys); return -1; }
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys) && rc == 0; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *n = PyDict_GetItemWithError(counts, key);
        uint32_t e, c;
        unsigned char *at;
        if (n == NULL) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key); rc = -1; }
        else if (field_of(key, 0, U32, &e) < 0 || field_of(n, 0, U32, &c) < 0) rc = -1;
        else if ((at = out_room(o, 8)) == NULL) rc = -1;
        else { put32(at, e); put32(at + 4, c); }
    }
    Py_DECREF(keys);
    return rc;
}

/* One item: (ledger, entry) or (ledger, entry, named). */
static int put_item(Out *o, PyObject *item) {
    Py_ssize_t size = PyTuple_Check(item) ? PyTuple_GET_SIZE(item) : 0;
    if (size != 2 && size != 3) {
        PyErr_SetString(PyExc_TypeError, "a marker item is (ledger, entry) or (ledger, entry, named)");
        return -1;
    }
    PyObject *entry = PyTuple_GET_ITEM(item, 1), *named = size == 3 ? PyTuple_GET_ITEM(item, 2) : Py_None;
    uint32_t ledger, seq = 0, runs = 0, nadds = 0, ncounts = 0;
    if (field_of(PyTuple_GET_ITEM(item, 0), 0, U32, &ledger) < 0) return -1;
    Py_ssize_t head = o->len;
    if (out_room(o, 16) == NULL) return -1;
    if (entry != Py_None) {
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 4) {
            PyErr_SetString(PyExc_TypeError, "a marker item's entry is None or (seq, runs, adds, counts, ...)");
            return -1;
        }
        PyObject *adds = PyTuple_GET_ITEM(entry, 2), *counts = PyTuple_GET_ITEM(entry, 3);
        if (field_of(PyTuple_GET_ITEM(entry, 0), 1, U32, &seq) < 0) return -1;
        if (field_of(PyTuple_GET_ITEM(entry, 1), 0, U32, &runs) < 0) return -1;
        int some = counts == Py_None ? 0 : PyObject_IsTrue(counts);
        if (some < 0) return -1;
        if (some) {
            if (!PyDict_Check(counts)) { PyErr_SetString(PyExc_TypeError, "counts are a dict"); return -1; }
            if (PyDict_GET_SIZE(counts) > U16) { PyErr_SetString(PyExc_OverflowError, OUTSIDE_LAYOUT); return -1; }
            ncounts = (uint32_t)PyDict_GET_SIZE(counts);
        }
        int any = adds == Py_None ? 0 : PyObject_IsTrue(adds);
        if (any < 0) return -1;
        if (any) {
            int minus = named == Py_None ? 0 : PyObject_IsTrue(named);
            if (minus < 0) return -1;
            if (put_adds(o, adds, minus ? named : NULL, &nadds) < 0) return -1;
        }
        if (ncounts && put_counts(o, counts) < 0) return -1;
    }
    unsigned char *at = o->b + head;
    put32(at, ledger); put32(at + 4, seq); put32(at + 8, runs);
    put16(at + 12, nadds); put16(at + 14, ncounts);
    return 0;
}

/* The marker record `o` holds (its body from byte 7 on) with `props` appended, sealed in
 * the fixed envelope of format `version`: the record's bytes, or NULL with an exception. */
int seal_envelope_at(Out *o, Py_ssize_t at, uint32_t rtype, uint32_t version) {
    int64_t crc = crc32_of(o->b + at + 7, o->len - at - 7, rtype << 8 | version);
    if (crc < 0) return -1;
    o->b[at] = 0xC1;
    o->b[at + 1] = (unsigned char)rtype;
    o->b[at + 2] = (unsigned char)version;
    put32(o->b + at + 3, (uint32_t)crc);
    return 0;
}

static PyObject *seal_marker(Out *o, PyObject *props, uint32_t version) {
    Py_ssize_t np = PyBytes_GET_SIZE(props);
    unsigned char *at;
    if (np && (at = out_room(o, np)) == NULL) return NULL;
    if (np) memcpy(at, PyBytes_AS_STRING(props), np);
    if (seal_envelope_at(o, 0, RECORD_MARKER, version) < 0) return NULL;
    return PyBytes_FromStringAndSize((const char *)o->b, o->len);
}

static PyObject *fixed_marker(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "fixed_marker(version, flags, prev, md_l, md_e, rp_l, rp_e, cursor_id, items, properties)");
        return NULL;
    }
    PyObject *items = args[8], *props = args[9], *result = NULL;
    if (!PyList_Check(items)) { PyErr_SetString(PyExc_TypeError, "items are a list"); return NULL; }
    if (!PyBytes_Check(props)) { PyErr_SetString(PyExc_TypeError, "properties are bytes"); return NULL; }
    uint32_t version, flags, head[6];
    static const long long adds[6] = {0, 0, 1, 0, 1, 0};
    if (field_of(args[0], 0, 0xFF, &version) < 0) return NULL;
    if (field_of(args[1], 0, 0xFF, &flags) < 0) return NULL;
    for (int i = 0; i < 6; i++) {
        if (i == 0 && minus_one(args[2])) { /* prev -1: none */
            head[0] = NO_PREV;
            continue;
        }
        if (field_of(args[2 + i], adds[i], i == 0 ? U32 - 1 : U32, &head[i]) < 0) return NULL; /* (NO_PREV: none's) */
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n > U16) { PyErr_SetString(PyExc_OverflowError, OUTSIDE_LAYOUT); return NULL; }
    Out o = {NULL, 0, 0};
    unsigned char *at = out_room(&o, 7 + 28 + 16 * n + PyBytes_GET_SIZE(props));
    if (at == NULL) return NULL;
    o.len = 7 + 28;
    at[7] = 0xC1;
    at[8] = (unsigned char)flags;
    for (int i = 0; i < 6; i++) put32(at + 9 + 4 * i, head[i]);
    put16(at + 33, (uint32_t)n);
    for (Py_ssize_t i = 0; i < n; i++)
        if (put_item(&o, PyList_GET_ITEM(items, i)) < 0) goto done;
    result = seal_marker(&o, props, (uint32_t)version);
done:
    PyMem_Free(o.b);
    return result;
}

/* state_marker(version, cursor_id, md_l, md_e, ledgers, properties, truncated=False) -> bytes:
 * a whole marker record in the fixed envelope and the state layout (format 10; records.py's
 * module docstring), pure_codecs.state_marker: the same bytes, the same errors. `ledgers`: a
 * list of (ledger, bitmap, {entry: (size, mask)}, {entry: count}), ascending; `truncated`: the
 * state holds only the lowest ranges a flush persists (PIP-299, format 16). */

/* point_value(micros, fields) -> bytes: a big-endian u64 `micros`, then each int of the
 * tuple `fields` as a varint (a history point's value: ackstore/history.py);
 * pure_codecs.point_value: the same bytes, the same errors. */
static PyObject *point_value(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *micros_obj, *fields;
    if (!PyArg_ParseTuple(args, "OO!", &micros_obj, &PyTuple_Type, &fields)) return NULL;
    long long micros;
    if (ranged_arg(micros_obj, "micros", 0, LLONG_MAX, &micros) < 0) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    Out o = {NULL, 0, 0};
    unsigned char *at = out_room(&o, 8 + 3 * n);
    if (at == NULL) return NULL;
    for (int i = 0; i < 8; i++) at[i] = (unsigned char)((unsigned long long)micros >> (56 - 8 * i));
    o.len = 8;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        if (ranged_arg(PyTuple_GET_ITEM(fields, i), "a point field", 0, LLONG_MAX, &v) < 0 || put_varint(&o, (unsigned long long)v) < 0)
            goto done;
    }
    result = PyBytes_FromStringAndSize((const char *)o.b, o.len);
done:
    PyMem_Free(o.b);
    return result;
}

/* The sorted keys of a dict, as a new list (NULL with an exception set). */
static PyObject *sorted_keys(PyObject *d) {
    if (!PyDict_Check(d)) { PyErr_SetString(PyExc_TypeError, "batches and counts are dicts"); return NULL; }
    PyObject *keys = PyDict_Keys(d);
    if (keys != NULL && PyList_Sort(keys) < 0) Py_CLEAR(keys);
    return keys;
}

int put_state_counts(Out *o, long long ledger, const uint32_t *entries, const uint32_t *ns, Py_ssize_t stride,
                     Py_ssize_t n, long long start) {
    if (put_varint(o, (unsigned long long)n) < 0) return -1;
    long long at = start;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long entry = entries[i * stride], count = ns[i * stride];
        if (entry < at || count < 1) {
            PyErr_Format(PyExc_ValueError, "ledger %lld's delivery count %lld of entry %lld is outside the layout",
                         ledger, count, entry);
            return -1;
        }
        if (put_varint(o, (unsigned long long)(entry - at)) < 0 || put_varint(o, (unsigned long long)(count - 1)) < 0)
            return -1;
        at = entry + 1;
    }
    return 0;
}

/* A ledger's delivery counts ({entry: count}) as put_state_counts writes them. */
static int put_state_count_dict(Out *o, PyObject *d, long long ledger, long long start) {
    PyObject *keys = sorted_keys(d);
    if (keys == NULL) return -1;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    uint32_t *entries = PyMem_Malloc(2 * (n ? n : 1) * sizeof(uint32_t)), *ns = entries + n;
    int rc = -1;
    if (entries == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *v = PyDict_GetItemWithError(d, key);
        long long entry, count;
        if (v == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            goto done;
        }
        if (ranged_arg(key, "entry", LLONG_MIN, LLONG_MAX, &entry) < 0 || ranged_arg(v, "count", LLONG_MIN, LLONG_MAX, &count) < 0)
            goto done;
        if (entry < start || entry > U32_MAX_LL || count < 1 || count > U32_MAX_LL) {
            PyErr_Format(PyExc_ValueError, "ledger %lld's delivery count %lld of entry %lld is outside the layout",
                         ledger, count, entry);
            goto done;
        }
        entries[i] = (uint32_t)entry;
        ns[i] = (uint32_t)count;
    }
    rc = put_state_counts(o, ledger, entries, ns, 1, n, start);
done:
    PyMem_Free(entries);
    Py_DECREF(keys);
    return rc;
}

/* A ledger's partial batches ({entry: (size, mask)}): their number, then per entry,
 * ascending, its gap from the one before (from `start`), the batch's size and mask bytes. */
int put_state_batches(Out *o, PyObject *d, long long ledger, long long start) {
    PyObject *keys = sorted_keys(d);
    if (keys == NULL) return -1;
    int rc = put_varint(o, (unsigned long long)PyList_GET_SIZE(keys));
    long long at = start;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys) && rc == 0; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *v = PyDict_GetItemWithError(d, key), *mask = NULL;
        long long entry, n;
        rc = -1;
        if (v == NULL) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key); break; }
        if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
            PyErr_SetString(PyExc_TypeError, "a batch is (size, mask)");
            break;
        }
        if (ranged_arg(key, "entry", LLONG_MIN, LLONG_MAX, &entry) < 0) break;
        if (ranged_arg(PyTuple_GET_ITEM(v, 0), "size", LLONG_MIN, LLONG_MAX, &n) < 0) break;
        if (entry < at || n < 1 || n > U32_MAX_LL) {
            PyErr_Format(PyExc_ValueError, "ledger %lld's partial batch at entry %lld of size %lld is outside the layout",
                         ledger, entry, n);
            break;
        }
        mask = PyObject_CallMethod(PyTuple_GET_ITEM(v, 1), "to_bytes", "ns", (Py_ssize_t)((n + 7) / 8), "little");
        if (mask == NULL) break;
        unsigned char *room;
        if (put_varint(o, (unsigned long long)(entry - at)) == 0 && put_varint(o, (unsigned long long)n) == 0) {
            rc = 0;
            if ((room = out_room(o, PyBytes_GET_SIZE(mask))) == NULL) rc = -1;
            else memcpy(room, PyBytes_AS_STRING(mask), PyBytes_GET_SIZE(mask));
        }
        Py_XDECREF(mask);
        at = entry + 1;
    }
    Py_DECREF(keys);
    return rc;
}

/* The maximal runs of a bitmap: their first and last values in two PyMem buffers the caller
 * frees, and their number (-1 with an exception set). A bitmap of a few values is read
 * whole; a larger one (a long run is one run whatever its length) through its runs' starts
 * and ends, two bitmaps its own shift and difference make in O(containers), as
 * ledger_acks.run_bounds does. */
#define RUNS_READ_WHOLE 4096
Py_ssize_t bitmap_runs(PyObject *bitmap, uint32_t **firsts, uint32_t **lasts) {
    *firsts = *lasts = NULL;
    Py_ssize_t card = PyObject_Length(bitmap);
    if (card < 0) return -1;
    if (card > RUNS_READ_WHOLE) {
        PyObject *ends[2] = {NULL, NULL};
        for (int side = 0; side < 2; side++) {
            PyObject *shifted = PyObject_CallMethod(bitmap, "shift", "i", side ? -1 : 1);
            if (shifted == NULL) break;
            ends[side] = PyNumber_Subtract(bitmap, shifted);
            Py_DECREF(shifted);
            if (ends[side] == NULL) break;
        }
        Py_ssize_t n = -1, m = -1;
        if (ends[0] != NULL && ends[1] != NULL) {
            n = bitmap_values(ends[0], firsts);
            if (n >= 0) m = bitmap_values(ends[1], lasts);
        }
        Py_XDECREF(ends[0]);
        Py_XDECREF(ends[1]);
        if (n < 0 || m < 0 || n != m) {
            if (n >= 0 && m >= 0) PyErr_SetString(PyExc_ValueError, "a bitmap's runs have unequal starts and ends");
            PyMem_Free(*firsts);
            PyMem_Free(*lasts);
            *firsts = *lasts = NULL;
            return -1;
        }
        return n;
    }
    Sink k;
    Py_ssize_t n = bitmap_walk(bitmap, &k, 1);
    *firsts = k.firsts;
    *lasts = k.lasts;
    return n;
}

int put_state_head(Out *o, int flags, unsigned long long cid, long long md_l, long long md_e, Py_ssize_t ledgers) {
    unsigned char *at = out_room(o, 2);
    if (at == NULL) return -1;
    at[0] = 0xC2;
    at[1] = (unsigned char)flags;
    if (put_varint(o, cid) < 0 || put_varint(o, (unsigned long long)md_l) < 0 ||
        put_varint(o, (unsigned long long)(md_e + 1)) < 0 || put_varint(o, (unsigned long long)ledgers) < 0)
        return -1;
    return 0;
}

int put_state_runs(Out *o, long long ledger, const uint32_t *firsts, const uint32_t *lasts, Py_ssize_t stride,
                   Py_ssize_t n, long long pos) {
    if (put_varint(o, (unsigned long long)n) < 0) return -1;
    for (Py_ssize_t j = 0; j < n; j++) {
        long long first = firsts[j * stride], end = lasts[j * stride];
        if (first < pos) {
            PyErr_Format(PyExc_ValueError, "ledger %lld holds entry %lld, at or below the mark-delete position", ledger,
                         first);
            return -1;
        }
        if (put_varint(o, (unsigned long long)(first - pos)) < 0 || put_varint(o, (unsigned long long)(end - first)) < 0)
            return -1;
        pos = end + 2;
    }
    return 0;
}

/* The state marker of `n` ledgers given as parallel arrays (borrowed references, ledgers
 * ascending): state_marker's work once its arguments are unpacked. */
static PyObject *state_marker_of(PyObject *version_obj, PyObject *cid_obj, PyObject *md_l_obj, PyObject *md_e_obj,
                          Py_ssize_t n, PyObject *const *ids, PyObject *const *bitmaps, PyObject *const *batches,
                          PyObject *const *counts, PyObject *props, int cut) {
    PyObject *result = NULL;
    long long version, cid, md_l, md_e;
    if (ranged_arg(cid_obj, "cursor_id", 0, LEDGER_MAX_LL, &cid) < 0) return NULL;
    if (ranged_arg(md_l_obj, "md_l", 0, LEDGER_MAX_LL, &md_l) < 0) return NULL;
    if (ranged_arg(md_e_obj, "md_e", -1, U32_MAX_LL - 1, &md_e) < 0) return NULL;
    if (ranged_arg(version_obj, "version", 0, 0xFF, &version) < 0) return NULL;
    if (!PyBytes_Check(props)) { PyErr_SetString(PyExc_TypeError, "properties are bytes"); return NULL; }
    int flags = (PyBytes_GET_SIZE(props) ? STATE_PROPS : 0) | (cut ? STATE_TRUNCATED : 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        int b = PyObject_IsTrue(batches[i]), c = PyObject_IsTrue(counts[i]);
        if (b < 0 || c < 0) return NULL;
        flags |= (b ? STATE_BATCHES : 0) | (c ? STATE_COUNTS : 0);
    }
    Out o = {NULL, 0, 0};
    if (out_room(&o, 7) == NULL || put_state_head(&o, flags, (unsigned long long)cid, md_l, md_e, n) < 0) goto done;
    long long last = md_l;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long ledger;
        if (ranged_arg(ids[i], "ledger", last, LEDGER_MAX_LL, &ledger) < 0) goto done;
        long long start = ledger == md_l ? md_e + 1 : 0;
        if (put_varint(&o, (unsigned long long)(ledger - last)) < 0) goto done;
        last = ledger + 1;
        uint32_t *firsts = NULL, *lasts = NULL;
        Py_ssize_t nruns = bitmap_runs(bitmaps[i], &firsts, &lasts);
        if (nruns < 0) goto done;
        int bad = put_state_runs(&o, ledger, firsts, lasts, 1, nruns, start) < 0;
        PyMem_Free(firsts);
        PyMem_Free(lasts);
        if (bad) goto done;
        if ((flags & STATE_BATCHES) && put_state_batches(&o, batches[i], ledger, start) < 0) goto done;
        if ((flags & STATE_COUNTS) && put_state_count_dict(&o, counts[i], ledger, start) < 0) goto done;
    }
    result = seal_marker(&o, props, (uint32_t)version);
done:
    PyMem_Free(o.b);
    return result;
}

PyObject *state_marker(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "state_marker(version, cursor_id, md_l, md_e, ledgers, properties, truncated=False)");
        return NULL;
    }
    int cut = nargs == 7 ? PyObject_IsTrue(args[6]) : 0;
    if (cut < 0) return NULL;
    PyObject *ledgers = args[4];
    if (!PyList_Check(ledgers)) { PyErr_SetString(PyExc_TypeError, "ledgers are a list"); return NULL; }
    Py_ssize_t n = PyList_GET_SIZE(ledgers);
    PyObject **arrays = PyMem_Malloc(4 * (n ? n : 1) * sizeof(PyObject *)), *result = NULL;
    if (arrays == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(ledgers, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyErr_SetString(PyExc_TypeError, "a ledger is (ledger, bitmap, batches, counts)");
            goto done;
        }
        for (int f = 0; f < 4; f++) arrays[f * n + i] = PyTuple_GET_ITEM(item, f);
    }
    Py_INCREF(ledgers); /* its items, borrowed in `arrays`, live while it does */
    result = state_marker_of(args[0], args[1], args[2], args[3], n, arrays, arrays + n, arrays + 2 * n,
                             arrays + 3 * n, args[5], cut);
    Py_DECREF(ledgers);
done:
    PyMem_Free(arrays);
    return result;
}

/* pure_codecs.read_varint: the varint at r, at most `most`; ValueError naming `kind`'s `what` */
int get_varint_of(Reader *r, unsigned long long most, const char *kind, const char *what,
                         unsigned long long *out) {
    unsigned long long n = 0;
    int shift = 0;
    while (1) {
        if (r->i >= r->len) {
            PyErr_Format(PyExc_ValueError, "%s ends inside its %s", kind, what);
            return -1;
        }
        unsigned char b = r->p[r->i++];
        if (shift > 63 || (shift == 63 && (b & 0x7E))) { /* more than 64 bits */
            PyErr_Format(PyExc_ValueError, "%s's %s is not a varint", kind, what);
            return -1;
        }
        n |= (unsigned long long)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
    }
    if (n > most) {
        PyErr_Format(PyExc_ValueError, "%s's %s %llu is over %llu", kind, what, n, most);
        return -1;
    }
    *out = n;
    return 0;
}

static int get_varint(Reader *r, unsigned long long most, const char *what, unsigned long long *out) {
    return get_varint_of(r, most, "a state marker", what, out);
}

static uint32_t get_be32(const unsigned char *p);

int get_slot_head(const unsigned char *key, Py_ssize_t klen, const unsigned char *v, Py_ssize_t len,
                  unsigned long long *seq, Py_ssize_t *start) {
    Reader r = {v, len, 0};
    if (get_varint_of(&r, LLONG_MAX, "a state slot", "sequence", seq) < 0) return -1;
    if (r.len - r.i < 4) {
        PyErr_SetString(PyExc_ValueError, "a state slot ends inside its check");
        return -1;
    }
    int64_t crc = crc32_of(key, klen, 0);
    if (crc >= 0) crc = crc32_of(r.p, r.i, (uint32_t)crc);
    if (crc < 0) return -1;
    if ((uint32_t)crc != get_be32(r.p + r.i)) {
        PyErr_SetString(PyExc_ValueError, "a state slot's check does not match its key and sequence");
        return -1;
    }
    Py_ssize_t at = r.i + 4;
    while (at < r.len && r.p[at] == 0) at++; /* the room a first value reserves */
    *start = at;
    return 0;
}

/* slot_head(key, value) -> (seq, start): get_slot_head, pure_codecs.slot_head (the same
 * results, the same errors) */
static PyObject *slot_head(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer key, value;
    if (!PyArg_ParseTuple(args, "y*y*", &key, &value)) return NULL;
    PyObject *result = NULL;
    unsigned long long seq;
    Py_ssize_t start;
    if (get_slot_head(key.buf, key.len, value.buf, value.len, &seq, &start) == 0)
        result = Py_BuildValue("(Kn)", seq, start);

    PyBuffer_Release(&key);
    PyBuffer_Release(&value);
    return result;
}

int get_state_count_n(Reader *r, unsigned long long *n) {
    return get_varint(r, (unsigned long long)r->len, "count count", n);
}

int get_state_count(Reader *r, unsigned long long *at, unsigned long long *entry, unsigned long long *n) {
    unsigned long long gap, v;
    if (get_varint(r, U32_MAX_LL, "counted entry", &gap) < 0 || get_varint(r, U32_MAX_LL - 1, "delivery count", &v) < 0)
        return -1;
    *entry = *at + gap;
    *n = v + 1;
    *at = *entry + 1;
    return 0;
}

/* {entry: (size, mask)} or {entry: count} of one ledger, as state_fields reads them. */
PyObject *get_state_entries(Reader *r, unsigned long long start, long long ledger, int batches,
                            unsigned long long *highest) {
    unsigned long long n, at = start, gap, v;
    if ((batches ? get_varint(r, (unsigned long long)r->len, "batch count", &n) : get_state_count_n(r, &n)) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (unsigned long long k = 0; k < n; k++) {
        unsigned long long entry;
        if (!batches) {
            if (get_state_count(r, &at, &entry, &v) < 0) goto bad;
            PyObject *key = PyLong_FromUnsignedLongLong(entry), *value = PyLong_FromUnsignedLongLong(v);
            int bad = key == NULL || value == NULL || PyDict_SetItem(d, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (bad) goto bad;
            *highest = entry; /* ascending: the last is the highest */
            continue;
        }
        if (get_varint(r, U32_MAX_LL, "batch entry", &gap) < 0 || get_varint(r, U32_MAX_LL, "batch size", &v) < 0)
            goto bad;
        entry = at + gap;
        PyObject *key = PyLong_FromUnsignedLongLong(entry), *value;
        if (key == NULL) goto bad;
        Py_ssize_t width = (Py_ssize_t)((v + 7) / 8);
        if (!v || r->i + width > r->len) {
            Py_XDECREF(key);
            PyErr_Format(PyExc_ValueError, "a state marker's ledger %lld batch of size %llu is damaged", ledger, v);
            goto bad;
        }
        PyObject *mask = key == NULL ? NULL : _PyLong_FromByteArray(r->p + r->i, width, 1, 0);
        value = mask == NULL ? NULL : Py_BuildValue("(KN)", v, mask);
        r->i += width;
        if (value == NULL || PyDict_SetItem(d, key, value) < 0) {
            Py_DECREF(key);
            Py_XDECREF(value);
            goto bad;
        }
        Py_DECREF(key);
        Py_DECREF(value);
        at = entry + 1;
        *highest = entry; /* ascending: the last is the highest */
    }
    return d;
bad:
    Py_DECREF(d);
    return NULL;
}

int get_state_head(Reader *r, int *flags, unsigned long long *cid, unsigned long long *md_l,
                   unsigned long long *md_e1, unsigned long long *n) {
    if (r->len - r->i < 2 || r->p[r->i] != 0xC2 || (r->p[r->i + 1] & ~(STATE_PROPS | STATE_BATCHES | STATE_COUNTS | STATE_TRUNCATED))) {
        PyErr_SetString(PyExc_ValueError, "a state marker's head is damaged (tag or flags)");
        return -1;
    }
    *flags = r->p[r->i + 1];
    r->i += 2;
    if (get_varint(r, LEDGER_MAX_LL, "cursor id", cid) < 0 || get_varint(r, LEDGER_MAX_LL, "mark-delete ledger", md_l) < 0 ||
        get_varint(r, U32_MAX_LL, "mark-delete entry", md_e1) < 0 || get_varint(r, (unsigned long long)r->len, "ledger count", n) < 0)
        return -1;
    return 0;
}

int get_state_ledger(Reader *r, unsigned long long md_l, unsigned long long md_e1, unsigned long long *last,
                     unsigned long long *ledger, unsigned long long *nruns, unsigned long long *at) {
    unsigned long long step;
    if (get_varint(r, (unsigned long long)LEDGER_MAX_LL - *last, "ledger id", &step) < 0) return -1;
    *ledger = *last + step;
    *last = *ledger + 1;
    *at = *ledger == md_l ? md_e1 : 0;
    return get_varint(r, (unsigned long long)r->len, "run count", nruns);
}

int get_state_run(Reader *r, unsigned long long ledger, unsigned long long *at, unsigned long long *first,
                  unsigned long long *last) {
    unsigned long long gap, length;
    if (get_varint(r, U32_MAX_LL, "run start", &gap) < 0 || get_varint(r, U32_MAX_LL, "run length", &length) < 0)
        return -1;
    *first = *at + gap;
    *last = *first + length;
    if (*last >= U32_MAX_LL + 1) {
        PyErr_Format(PyExc_ValueError, "a state marker's ledger %llu run ends past entry 2**32-1", ledger);
        return -1;
    }
    *at = *last + 2;
    return 0;
}

/* state_fields(body) -> (cursor id, md ledger, md entry, ledgers, end): a state-layout
 * marker body read back with the readers above, pure_codecs.state_fields (the same values,
 * the same ValueError). */
static PyObject *state_fields(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    Reader r = {(const unsigned char *)buf.buf, buf.len, 0};
    PyObject *ledgers = NULL, *result = NULL;
    unsigned long long cid, md_l, md_e1, n;
    int flags;
    if (get_state_head(&r, &flags, &cid, &md_l, &md_e1, &n) < 0) goto done;
    if ((ledgers = PyList_New(0)) == NULL) goto done;
    unsigned long long last = md_l;
    for (unsigned long long k = 0; k < n; k++) {
        unsigned long long ledger, nruns, at;
        if (get_state_ledger(&r, md_l, md_e1, &last, &ledger, &nruns, &at) < 0) goto done;
        unsigned long long start = at;
        PyObject *runs = PyList_New((Py_ssize_t)(2 * nruns)), *batches = NULL, *counts = NULL, *item;
        if (runs == NULL) goto done;
        for (unsigned long long j = 0; j < nruns; j++) {
            unsigned long long first, end;
            if (get_state_run(&r, ledger, &at, &first, &end) < 0) {
                Py_DECREF(runs);
                goto done;
            }
            PyObject *lo = PyLong_FromUnsignedLongLong(first), *hi = lo == NULL ? NULL : PyLong_FromUnsignedLongLong(end);
            if (hi == NULL) { /* MemoryError: no list with a hole in it goes back */
                Py_XDECREF(lo);
                Py_DECREF(runs);
                goto done;
            }
            PyList_SET_ITEM(runs, 2 * j, lo);
            PyList_SET_ITEM(runs, 2 * j + 1, hi);
        }
        unsigned long long hb = 0, hc = 0;
        batches = (flags & STATE_BATCHES) ? get_state_entries(&r, start, (long long)ledger, 1, &hb) : PyDict_New();
        counts = batches == NULL                ? NULL
                 : (flags & STATE_COUNTS) ? get_state_entries(&r, start, (long long)ledger, 0, &hc)
                                          : PyDict_New();
        if (counts != NULL && (hb > U32_MAX_LL || hc > U32_MAX_LL)) {
            PyErr_Format(PyExc_ValueError, "a state marker's ledger %llu names an entry past 2**32-1", ledger);
            Py_DECREF(counts);
            counts = NULL;
        }
        item = counts == NULL ? NULL : Py_BuildValue("(KNNN)", ledger, runs, batches, counts);
        if (item == NULL) {
            if (counts == NULL) { Py_DECREF(runs); Py_XDECREF(batches); }
            goto done;
        }
        int rc = PyList_Append(ledgers, item);
        Py_DECREF(item);
        if (rc < 0) goto done;
    }
    if (!(flags & STATE_PROPS) && r.i != buf.len) {
        PyErr_Format(PyExc_ValueError, "a state marker has %zd bytes after its ledgers", buf.len - r.i);
        goto done;
    }
    result = Py_BuildValue("(KKLOn)", cid, md_l, (long long)md_e1 - 1, ledgers, r.i);
done:
    Py_XDECREF(ledgers);
    PyBuffer_Release(&buf);
    return result;
}

static uint32_t get_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* scan_directory(items, prefix, sealed_type, open_type) -> (ids, counts, confirmed, bad):
 * pure_codecs.scan_directory. */
static PyObject *scan_directory(PyObject *self, PyObject *args) {
    PyObject *items, *iter, *bad = Py_None, *result = NULL, *item = NULL, *sealed_obj, *open_obj;
    Py_buffer prefix;
    long long sealed_ll, open_ll;
    if (!PyArg_ParseTuple(args, "Oy*OO", &items, &prefix, &sealed_obj, &open_obj)) return NULL;
    if (ranged_arg(sealed_obj, "sealed_type", 0, 255, &sealed_ll) < 0 || ranged_arg(open_obj, "open_type", 0, 255, &open_ll) < 0) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    int sealed_type = (int)sealed_ll, open_type = (int)open_ll;
    if ((iter = PyObject_GetIter(items)) == NULL) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    Py_ssize_t n = 0, cap = 64;
    int64_t *ids = PyMem_Malloc(cap * sizeof(int64_t)), *counts = PyMem_Malloc(cap * sizeof(int64_t));
    int64_t confirmed = 0;
    int has_confirmed = 0;
    if (ids == NULL || counts == NULL) { PyErr_NoMemory(); goto done; }
    while ((item = PyIter_Next(iter)) != NULL) {
        PyObject *key, *value;
        if (bytes_pair(item, &key, &value, "scan_directory") < 0) goto done;
        const unsigned char *k = (const unsigned char *)PyBytes_AS_STRING(key), *v;
        Py_ssize_t klen = PyBytes_GET_SIZE(key), vlen = PyBytes_GET_SIZE(value);
        /* past the topic: that entry is checked too (a damaged topic id in a key moves an
         * entry out of its topic's range, and its checksum, which covers the key, fails) */
        int past = klen < prefix.len || memcmp(k, prefix.buf, prefix.len) != 0;
        v = (const unsigned char *)PyBytes_AS_STRING(value);
        int ok = klen == 16;
        int64_t count = 0, conf = 0;
        int is_open = 0;
        if (ok && vlen == 14) {
            count = (int64_t)get_u64_be(v + 2);
            ok = v[0] == sealed_type && count >= -1;
            if (ok) ok = (uint32_t)crc32_of(v, 10, (uint32_t)crc32_of(k, 16, 0)) == get_be32(v + 10);
        } else if (ok && vlen == 22) {
            count = (int64_t)get_u64_be(v + 2);
            conf = (int64_t)get_u64_be(v + 10);
            is_open = 1;
            ok = v[0] == open_type && count == -1 && conf >= -1;
            if (ok) ok = (uint32_t)crc32_of(v, 18, (uint32_t)crc32_of(k, 16, 0)) == get_be32(v + 18);
        } else {
            ok = 0;
        }
        if (!ok) {
            bad = item;
            item = NULL;
            break;
        }
        int64_t id = (int64_t)get_u64_be(k + 8); /* read while `item` holds the key's bytes */
        Py_CLEAR(item);
        if (past) break;
        if (n == cap) {
            cap *= 2;
            int64_t *i2 = PyMem_Realloc(ids, cap * sizeof(int64_t)), *c2;
            if (i2 == NULL) { PyErr_NoMemory(); goto done; }
            ids = i2;
            c2 = PyMem_Realloc(counts, cap * sizeof(int64_t));
            if (c2 == NULL) { PyErr_NoMemory(); goto done; }
            counts = c2;
        }
        ids[n] = id;
        counts[n++] = count;
        has_confirmed = is_open;
        confirmed = conf;
    }
    if (PyErr_Occurred()) goto done;
    if (has_confirmed)
        result = Py_BuildValue("y#y#LO", (const char *)ids, n * (Py_ssize_t)sizeof(int64_t), (const char *)counts,
                               n * (Py_ssize_t)sizeof(int64_t), (long long)confirmed, bad);
    else
        result = Py_BuildValue("y#y#OO", (const char *)ids, n * (Py_ssize_t)sizeof(int64_t), (const char *)counts,
                               n * (Py_ssize_t)sizeof(int64_t), Py_None, bad);
done:
    if (bad != Py_None) Py_DECREF(bad);
    Py_XDECREF(item);
    Py_DECREF(iter);
    PyMem_Free(ids);
    PyMem_Free(counts);
    PyBuffer_Release(&prefix);
    return result;
}

/* in _fields.c */
PyObject *fields_type(PyObject *self, PyObject *args);

/* in _chain.c */
PyObject *chain_setup(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"delta_fields", delta_fields, METH_VARARGS, "The fields of a fixed-layout marker body."},
    {"positions_by_ledger", positions_by_ledger, METH_O, "Acks' positions grouped per ledger, as roaring bytes."},
    {"rice_code", rice_code, METH_VARARGS, "The Rice code of ascending values (what acks_roaring reads)."},
    {"gap_planes", gap_planes, METH_VARARGS, "The gap planes of ascending values (what acks_roaring reads, unzipped)."},
    {"ledger_fields", ledger_fields, METH_VARARGS, "A ledger record body's fields, its bitmap not decoded."},
    {"open_envelope", open_envelope, METH_VARARGS, "A record's fixed envelope checked: (type, version, body)."},
    {"ledger_span", ledger_span, METH_VARARGS, "A ledger record's envelope and checksum checked, then its fields."},
    {"cursor_fields", cursor_fields, METH_VARARGS, "A cursors catalog entry's fields, its configuration as bytes."},
    {"cursor_entry", cursor_entry, METH_VARARGS, "cursor_fields of a cursors catalog entry, its envelope checked."},
    {"scan_directory", scan_directory, METH_VARARGS, "A topic's ledger directory entries checked and gathered."},
    {"scan_cursors", scan_cursors, METH_VARARGS, "A topic's cursors entries checked and gathered."},
    {"fixed_marker", (PyCFunction)(void (*)(void))fixed_marker, METH_FASTCALL,
     "A marker record in the fixed envelope and layout (pure_codecs.fixed_marker)."},
    {"state_marker", (PyCFunction)(void (*)(void))state_marker, METH_FASTCALL,
     "A marker record in the fixed envelope and the state layout (pure_codecs.state_marker)."},
    {"state_fields", state_fields, METH_VARARGS, "The fields of a state-layout marker body (pure_codecs.state_fields)."},
    {"point_value", point_value, METH_VARARGS, "A history point's value: a u64 and varints (pure_codecs.point_value)."},
    {"slot_head", slot_head, METH_VARARGS, "A state slot's sequence and record offset, checked (pure_codecs.slot_head)."},
    {"fields_type", fields_type, METH_VARARGS, "A type holding the given fields in its own struct (ackstore/fields.py)."},
    {"chain_setup", chain_setup, METH_VARARGS, "The bounds of a marker chain's rules (cursor/chain.py)."},
    {"_crc32", crc32_call, METH_VARARGS, "zlib.crc32(data, value) as the compiled codecs compute it (tests)."},
    {"_crc_folds", crc_folds_switch, METH_O, "Whether the CRC-32 folds with PCLMULQDQ from now on (tests)."},
    {NULL, NULL, 0, NULL},
};

/* called by PyInit__native (_module.c): the shared tables, then this part's functions */
int native_init(PyObject *module) {
    crc_init();
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib != NULL) {
        zlib_crc32 = PyObject_GetAttrString(zlib, "crc32");
        Py_DECREF(zlib);
    }
    if (zlib_crc32 == NULL) PyErr_Clear(); /* the table serves every length then */
    s_serialize = PyUnicode_InternFromString("serialize");
    if (s_serialize == NULL) return -1;
    return PyModule_AddFunctions(module, methods);
}
