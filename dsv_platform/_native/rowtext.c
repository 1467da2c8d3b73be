/*
 * dsv_platform._native._rowtext: canonical row text (dsv-canon/1,
 * docs/canonical-encoding.md) gathered, formatted and joined in one pass.
 *
 * encode(columns, perm, start, count[, ends]) -> Buffer
 * gather(texts, seg_rows, ends, order, start, count) -> Buffer
 *
 *   columns: list of (kind, p1, p2, local, chunks); chunks: list of
 *            (length, offset, validity or None, buf1, buf2 or None), the
 *            Arrow buffers of each chunk read zero-copy (buffer protocol).
 *   perm:    int64 buffer of row indices, or None (rows start..start+count).
 *   Row r (0 <= r < count) uses index perm[start + r] (or start + r) for a
 *   column with local = 0, and index r for a column with local = 1
 *   (per-chunk text prepared by the caller).
 *
 * Kinds (p1, p2):
 *   INT(width bytes, signed)     integer values buffer
 *   BOOL                         bit-packed values
 *   STRING(offset width, fixed)  UTF-8 text, COPY text escapes applied
 *   TEXT(offset width, fixed)    text written as is (pre-encoded)
 *   BINARY(offset width, fixed)  \\x + lowercase hex
 *                                fixed > 0: every value is `fixed` bytes, no
 *                                offsets (buf1 None); value i of the chunk
 *                                starts at byte i * fixed of buf2
 *   DECIMAL128(scale)            16-byte little-endian unscaled values
 *   TIMESTAMP(shift)             int64 counts; shift > 0: divide by 10**shift
 *                                (must be exact, else ValueError), shift < 0:
 *                                multiply by 10**-shift (exact in 128 bits)
 * Nulls (validity bit 0) are written as \N. Fields are joined by TAB and each
 * row ends in LF. The GIL is released while rows are written. Every index,
 * offset and buffer length is checked (IndexError / ValueError, never a read
 * out of bounds); the caller then falls back to the pure path.
 *
 * ends (optional): a writable int64 buffer; ends[r] is set to the byte
 * offset just past row r's LF. gather() then copies whole rows of such a
 * storage-order text in another order (the key order): one to three random
 * cache lines a row, where encoding in key order touches one per column.
 *
 * The result is a read-only Buffer (buffer protocol, no copy). Freed output
 * buffers are kept for reuse by the next call; trim() frees them.
 *
 * The pure numpy/Arrow path in dsv_platform/core/identity/canonical.py is the
 * reference; dsv_platform_tests/core/test_native_rowtext.py checks the two
 * give identical bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { K_INT = 0, K_BOOL = 1, K_STRING = 2, K_TEXT = 3, K_BINARY = 4, K_DECIMAL128 = 5, K_TIMESTAMP = 6 };


/* ------------------------------------------------------------------ */
/* output buffer object                                                */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
    size_t cap;
    Py_ssize_t exports;
} RowBuffer;

/*
 * A few freed output buffers are kept for the next chunks: a fresh buffer of
 * tens of MB costs a page fault per 4 KiB on first touch, which on a VM cost
 * as much as formatting the rows. Guarded by the GIL (pushed in dealloc,
 * popped before the GIL is released); trim() frees them.
 */
#define POOL_SLOTS 4
#define POOL_MAX_BYTES ((size_t)1 << 28)
static char *pool_data[POOL_SLOTS];
static size_t pool_cap[POOL_SLOTS];
static int pool_n = 0;

static void pool_push(char *data, size_t cap) {
    if (!data) return;
    if (pool_n < POOL_SLOTS && cap <= POOL_MAX_BYTES) {
        pool_data[pool_n] = data;
        pool_cap[pool_n++] = cap;
    } else {
        free(data);
    }
}

/* the pooled buffer closest to `want` bytes (the largest if none is big enough) */
static char *pool_pop(size_t want, size_t *cap) {
    if (!pool_n) return NULL;
    int best = 0;
    for (int i = 1; i < pool_n; i++) {
        int fits_i = pool_cap[i] >= want, fits_b = pool_cap[best] >= want;
        if ((fits_i && (!fits_b || pool_cap[i] < pool_cap[best])) || (!fits_i && !fits_b && pool_cap[i] > pool_cap[best])) best = i;
    }
    char *data = pool_data[best];
    *cap = pool_cap[best];
    pool_data[best] = pool_data[--pool_n];
    pool_cap[best] = pool_cap[pool_n];
    return data;
}

static PyObject *rowtext_trim(PyObject *self, PyObject *unused) {
    while (pool_n) free(pool_data[--pool_n]);
    Py_RETURN_NONE;
}

static void RowBuffer_dealloc(RowBuffer *self) {
    pool_push(self->data, self->cap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int RowBuffer_getbuffer(RowBuffer *self, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : "", self->size, 1, flags) < 0) return -1;
    self->exports++;
    return 0;
}

static void RowBuffer_releasebuffer(RowBuffer *self, Py_buffer *view) { self->exports--; }

static Py_ssize_t RowBuffer_length(RowBuffer *self) { return self->size; }

static PyBufferProcs RowBuffer_as_buffer = {(getbufferproc)RowBuffer_getbuffer, (releasebufferproc)RowBuffer_releasebuffer};
static PySequenceMethods RowBuffer_as_sequence = {(lenfunc)RowBuffer_length};

static PyTypeObject RowBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dsv_platform._native._rowtext.Buffer",
    .tp_basicsize = sizeof(RowBuffer),
    .tp_dealloc = (destructor)RowBuffer_dealloc,
    .tp_as_buffer = &RowBuffer_as_buffer,
    .tp_as_sequence = &RowBuffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes of canonical row text (buffer protocol).",
};

static RowBuffer *new_buffer(void) {
    RowBuffer *result = PyObject_New(RowBuffer, &RowBufferType);
    if (!result) return NULL;
    result->data = NULL;
    result->size = 0;
    result->cap = 0;
    result->exports = 0;
    return result;
}

/* ------------------------------------------------------------------ */
/* column descriptions                                                 */

typedef struct {
    int64_t length, offset;
    const uint8_t *validity; /* NULL: no nulls */
    const uint8_t *buf1;
    const uint8_t *buf2;
    Py_ssize_t len1, len2;
} Chunk;

typedef struct {
    int kind, p1, p2, local;
    int nchunks;
    Chunk *chunks;
    int64_t *starts; /* nchunks + 1 cumulative row starts */
    int64_t total;
    int layout; /* index of the column's chunk layout (see Layout) */
} Column;

/*
 * Columns cut into the same chunks (same local flag, same row starts) share a
 * layout, so a row's chunk is found once per layout, not once per column: a
 * table read from many batches has one layout for all its columns. The chunk
 * holding row i is found without a search: table[i >> shift] is the chunk
 * holding the first row of i's block (about two blocks a chunk, so a small
 * table that stays in cache), and a step or two forward reaches i's chunk
 * (skipping empty chunks). The old per-column binary search over ~80 chunks,
 * three times a row, made a spilled partition 1.5x slower than one chunk.
 */
typedef struct {
    int local, nchunks, shift;
    const int64_t *starts; /* the first column's starts (same values for every column of the layout) */
    int64_t total;
    int32_t *table; /* (total - 1 >> shift) + 1 entries; NULL when nchunks <= 1 or total == 0 */
} Layout;

/* where a row's values are in one layout: chunk (-1: row out of range) and row within the chunk */
typedef struct {
    int64_t rel;
    int32_t chunk;
} Loc;

typedef struct {
    Py_buffer *views;
    int nviews, cap;
} Views;

static const uint8_t *take_view(Views *v, PyObject *obj, Py_ssize_t *len) {
    if (obj == Py_None) {
        *len = 0;
        return NULL;
    }
    if (v->nviews == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        Py_buffer *grown = PyMem_Realloc(v->views, sizeof(Py_buffer) * cap);
        if (!grown) {
            PyErr_NoMemory();
            return NULL;
        }
        v->views = grown;
        v->cap = cap;
    }
    if (PyObject_GetBuffer(obj, &v->views[v->nviews], PyBUF_SIMPLE) < 0) return NULL;
    Py_buffer *view = &v->views[v->nviews++];
    *len = view->len;
    return view->buf ? (const uint8_t *)view->buf : (const uint8_t *)"";
}

static void release_views(Views *v) {
    for (int i = 0; i < v->nviews; i++) PyBuffer_Release(&v->views[i]);
    PyMem_Free(v->views);
}

static void free_columns(Column *cols, int n) {
    if (!cols) return;
    for (int i = 0; i < n; i++) {
        PyMem_Free(cols[i].chunks);
        PyMem_Free(cols[i].starts);
    }
    PyMem_Free(cols);
}

static int parse_column(PyObject *item, Column *col, Views *views) {
    PyObject *chunks;
    if (!PyArg_ParseTuple(item, "iiipO", &col->kind, &col->p1, &col->p2, &col->local, &chunks)) return -1;
    if (col->kind < K_INT || col->kind > K_TIMESTAMP) {
        PyErr_SetString(PyExc_ValueError, "unknown column kind");
        return -1;
    }
    if ((col->kind == K_STRING || col->kind == K_TEXT || col->kind == K_BINARY) && col->p1 != 4 && col->p1 != 8) {
        PyErr_SetString(PyExc_ValueError, "offset width must be 4 or 8");
        return -1;
    }
    if ((col->kind == K_STRING || col->kind == K_TEXT || col->kind == K_BINARY) && (col->p2 < 0 || col->p2 > 4096)) {
        PyErr_SetString(PyExc_ValueError, "fixed width out of range");
        return -1;
    }
    if (col->kind == K_INT && col->p1 != 1 && col->p1 != 2 && col->p1 != 4 && col->p1 != 8) {
        PyErr_SetString(PyExc_ValueError, "integer width must be 1, 2, 4 or 8");
        return -1;
    }
    if (col->kind == K_DECIMAL128 && (col->p1 < 0 || col->p1 > 38)) {
        PyErr_SetString(PyExc_ValueError, "decimal scale out of range");
        return -1;
    }
    if (col->kind == K_TIMESTAMP && (col->p1 < -18 || col->p1 > 18)) {
        PyErr_SetString(PyExc_ValueError, "timestamp shift out of range");
        return -1;
    }
    PyObject *seq = PySequence_Fast(chunks, "chunks must be a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    col->nchunks = (int)n;
    col->chunks = PyMem_Calloc(n ? n : 1, sizeof(Chunk));
    col->starts = PyMem_Calloc(n + 1, sizeof(int64_t));
    if (!col->chunks || !col->starts) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Chunk *c = &col->chunks[i];
        PyObject *validity, *b1, *b2;
        long long length, offset;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LLOOO", &length, &offset, &validity, &b1, &b2)) goto fail;
        if (length < 0 || offset < 0) {
            PyErr_SetString(PyExc_ValueError, "negative chunk length or offset");
            goto fail;
        }
        c->length = length;
        c->offset = offset;
        Py_ssize_t vlen;
        c->validity = take_view(views, validity, &vlen);
        if (PyErr_Occurred()) goto fail;
        c->buf1 = take_view(views, b1, &c->len1);
        if (PyErr_Occurred()) goto fail;
        c->buf2 = take_view(views, b2, &c->len2);
        if (PyErr_Occurred()) goto fail;
        int64_t end = offset + length;
        int ok = 1;
        if (c->validity && vlen * 8 < end) ok = 0;
        switch (col->kind) {
        case K_INT: ok &= c->buf1 != NULL && c->len1 >= end * col->p1; break;
        case K_BOOL: ok &= c->buf1 != NULL && c->len1 * 8 >= end; break;
        case K_DECIMAL128: ok &= c->buf1 != NULL && c->len1 >= end * 16; break;
        case K_TIMESTAMP: ok &= c->buf1 != NULL && c->len1 >= end * 8; break;
        default:
            if (col->p2 > 0) ok &= (length == 0) || (c->buf2 != NULL && c->len2 >= length * col->p2);
            else ok &= (length == 0) || (c->buf1 != NULL && c->len1 >= (end + 1) * col->p1);
            break;
        }
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "a buffer is shorter than its chunk");
            goto fail;
        }
        total += length;
        col->starts[i + 1] = total;
    }
    col->total = total;
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* ------------------------------------------------------------------ */
/* formatting                                                          */

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static inline int digits_u64(uint64_t v) {
    int n = 1;
    for (;;) {
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* writes exactly `n` digits of v (n = digits_u64(v) or more, zero padded) ending at out + n */
static inline void write_u64_n(char *out, uint64_t v, int n) {
    char *p = out + n;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * r, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * v, 2);
    } else {
        *--p = (char)('0' + v);
    }
    while (p > out) *--p = '0';
}

static inline char *write_u64(char *out, uint64_t v) {
    int n = digits_u64(v);
    write_u64_n(out, v, n);
    return out + n;
}

static inline char *write_i64(char *out, int64_t v) {
    if (v < 0) {
        *out++ = '-';
        return write_u64(out, (uint64_t)0 - (uint64_t)v);
    }
    return write_u64(out, (uint64_t)v);
}

typedef unsigned __int128 u128;
typedef __int128 i128;

/* decimal digits of a 128-bit magnitude into out (no sign); returns the count */
static inline int u128_digits(char *out, u128 v) {
    if ((v >> 64) == 0) {
        uint64_t x = (uint64_t)v;
        int n = digits_u64(x);
        write_u64_n(out, x, n);
        return n;
    }
    const uint64_t E19 = 10000000000000000000ULL;
    uint64_t parts[3];
    int np = 0;
    while (v >> 64) {
        parts[np++] = (uint64_t)(v % E19);
        v /= E19;
    }
    uint64_t head = (uint64_t)v;
    int n = digits_u64(head);
    write_u64_n(out, head, n);
    while (np) {
        write_u64_n(out + n, parts[--np], 19);
        n += 19;
    }
    return n;
}

/* plain notation with `scale` fraction digits */
static inline char *write_scaled(char *out, u128 mag, int negative, int scale) {
    char digits[48];
    int n = u128_digits(digits, mag);
    if (negative && mag != 0) *out++ = '-';
    if (scale == 0) {
        memcpy(out, digits, n);
        return out + n;
    }
    if (n <= scale) {
        *out++ = '0';
        *out++ = '.';
        memset(out, '0', scale - n);
        out += scale - n;
        memcpy(out, digits, n);
        return out + n;
    }
    memcpy(out, digits, n - scale);
    out += n - scale;
    *out++ = '.';
    memcpy(out, digits + n - scale, scale);
    return out + scale;
}

static inline char *write_i64_scaled(char *out, int64_t v, int scale) {
    if (scale == 0) return write_i64(out, v);
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0) *out++ = '-';
    int n = digits_u64(mag);
    if (n <= scale) {
        *out++ = '0';
        *out++ = '.';
        write_u64_n(out, mag, scale); /* zero padded to scale digits */
        return out + scale;
    }
    uint64_t p = 1;
    for (int i = 0; i < scale; i++) p *= 10;
    out = write_u64(out, mag / p);
    *out++ = '.';
    write_u64_n(out, mag % p, scale);
    return out + scale;
}

static const char HEX[] = "0123456789abcdef";
static uint8_t ESCAPE[256]; /* 0: as is, else the escape letter */

/* exact per-byte tests (Bit Twiddling Hacks' hasbetween): the high bit of each byte m < b < n */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t between(uint64_t x, unsigned m, unsigned n) {
    uint64_t low = x & (ONES * 127);
    return ((ONES * (127 + n) - low) & ~x & (low + ONES * (127 - m))) & HIGHS;
}
/* bytes COPY text escapes: 0x08..0x0D and backslash (0x5C) */
static inline uint64_t specials(uint64_t x) { return between(x, 7, 14) | between(x, 91, 93); }

/*
 * Escaped copy of s[0..n). `readable` bytes may be read from s (>= n; reads
 * past n stay inside the source buffer), and up to 8 bytes past the written
 * text may be scribbled on (the caller reserved them).
 */
static inline char *write_escaped(char *out, const uint8_t *s, int64_t n, int64_t readable) {
    int64_t i = 0;
    while (i < n) {
        if (readable - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            int64_t m = n - i < 8 ? n - i : 8;
            uint64_t hit = specials(w);
            if (m < 8) hit &= (1ULL << (8 * m)) - 1;
            memcpy(out, &w, 8);
            if (!hit) {
                out += m;
                i += m;
                continue;
            }
            int first = __builtin_ctzll(hit) >> 3;
            out += first;
            i += first;
        }
        uint8_t c = s[i++];
        if (ESCAPE[c]) {
            *out++ = '\\';
            *out++ = (char)ESCAPE[c];
        } else {
            *out++ = (char)c;
        }
    }
    return out;
}

/* ------------------------------------------------------------------ */
/* the row loop                                                        */

static void free_layouts(Layout *layouts, int n) {
    if (!layouts) return;
    for (int g = 0; g < n; g++) PyMem_Free(layouts[g].table);
    PyMem_Free(layouts);
}

/* groups the columns by chunk layout (sets each column's `layout`); NULL on memory error */
static Layout *build_layouts(Column *cols, int ncols, int *nlayouts) {
    Layout *ls = PyMem_Calloc(ncols ? ncols : 1, sizeof(Layout));
    if (!ls) return NULL;
    int n = 0;
    for (int k = 0; k < ncols; k++) {
        Column *c = &cols[k];
        int g = 0;
        while (g < n && !(ls[g].local == c->local && ls[g].nchunks == c->nchunks &&
                          memcmp(ls[g].starts, c->starts, sizeof(int64_t) * ((size_t)c->nchunks + 1)) == 0))
            g++;
        c->layout = g;
        if (g < n) continue;
        Layout *L = &ls[n++];
        L->local = c->local;
        L->nchunks = c->nchunks;
        L->starts = c->starts;
        L->total = c->total;
        if (c->nchunks <= 1 || c->total == 0) continue;
        int shift = 0;
        while ((c->total >> shift) > 2 * (int64_t)c->nchunks) shift++; /* about 2 blocks a chunk: at most a step or two forward */
        int64_t blocks = ((c->total - 1) >> shift) + 1;
        L->shift = shift;
        L->table = PyMem_Malloc(sizeof(int32_t) * (size_t)blocks);
        if (!L->table) {
            *nlayouts = n;
            free_layouts(ls, n);
            return NULL;
        }
        int32_t ch = 0;
        for (int64_t b = 0; b < blocks; b++) {
            while (c->starts[ch + 1] <= (b << shift)) ch++;
            L->table[b] = ch;
        }
    }
    *nlayouts = n;
    return ls;
}

/* the chunk and in-chunk row of row `idx` (or `local` for a local layout), for every layout */
static inline void locate_row(const Layout *ls, int nl, int64_t idx, int64_t local, Loc *out) {
    for (int g = 0; g < nl; g++) {
        const Layout *L = &ls[g];
        int64_t i = L->local ? local : idx;
        if (i < 0 || i >= L->total) {
            out[g].chunk = -1;
            out[g].rel = 0;
            continue;
        }
        int32_t c = 0;
        if (L->table) {
            c = L->table[i >> L->shift];
            while (L->starts[c + 1] <= i) c++;
        }
        out[g].chunk = c;
        out[g].rel = i - L->starts[c];
    }
}

/*
 * A prefetch the compiler cannot drop: GCC 12 deleted every __builtin_prefetch
 * of prefetch_values/prefetch_text once they read the row's chunk from the Loc
 * ring (a loop of nothing but prefetches), which made the gather 4x slower.
 */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define PREFETCH(addr) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(addr)))
#else
#define PREFETCH(addr) __builtin_prefetch(addr)
#endif

static inline int64_t off_at(const uint8_t *offsets, int width, int64_t i) {
    if (width == 4) {
        int32_t v;
        memcpy(&v, offsets + 4 * i, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, offsets + 8 * i, 8);
    return v;
}

typedef struct {
    char *data;
    size_t size, cap;
} Out;

/*
 * Large output buffers ask for 2 MiB pages (transparent huge pages in
 * "madvise" mode): a bucket's text is read back at random by gather(), and
 * with 4 KiB pages nearly every row would also miss the TLB.
 */
static void advise_huge(char *data, size_t cap) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)1 << 21;
    if (cap < 4 * huge) return;
    uintptr_t lo = ((uintptr_t)data + huge - 1) & ~(huge - 1), hi = ((uintptr_t)data + cap) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
}

static inline int reserve(Out *o, size_t need) {
    if (o->cap - o->size >= need) return 0;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap - o->size < need) cap *= 2;
    char *grown = realloc(o->data, cap);
    if (!grown) return -1;
    o->data = grown;
    o->cap = cap;
    advise_huge(grown, cap);
    return 0;
}

enum { E_OK = 0, E_NOMEM = 1, E_INDEX = 2, E_INEXACT = 3, E_DATA = 4 };

/* the output for about `want` bytes: a pooled buffer when there is one (call with the GIL; reserve() sizes it) */
static Out start_output(size_t want) {
    Out o = {0};
    if (want) o.data = pool_pop(want, &o.cap);
    return o;
}

/* hands the rows written to `result`; when rc is not E_OK the buffer is dropped (its memory back to the pool) and
   NULL returned, with MemoryError set for E_NOMEM (the caller sets the error of its other codes) */
static RowBuffer *finish_output(RowBuffer *result, Out *out, int rc) {
    result->data = out->data;
    result->size = (Py_ssize_t)out->size;
    result->cap = out->cap;
    if (rc == E_OK) return result;
    Py_DECREF(result);
    if (rc == E_NOMEM) PyErr_NoMemory();
    return NULL;
}

/*
 * One pass over the rows. Memory latency dominates a random-order gather
 * (every value of every column is a cache miss), so the values of the row
 * PREFETCH_DISTANCE rows ahead are prefetched, and the text bytes of the row
 * half as far ahead (their offsets are in cache by then). Measured on the
 * benchmark table: about 2x faster than gathering each column of a block of
 * rows first and formatting the block after.
 */
static int PREFETCH_DISTANCE = 16; /* rows; _set_prefetch_distance() is a tuning knob for benchmarks */
static int TEXT_DISTANCE = 8;

static inline void prefetch_values(const Column *cols, int ncols, const Loc *locs) {
    for (int k = 0; k < ncols; k++) {
        const Column *c = &cols[k];
        Loc l = locs[c->layout];
        if (l.chunk < 0) continue;
        const Chunk *ch = &c->chunks[l.chunk];
        int64_t at = ch->offset + l.rel;
        if (ch->validity) PREFETCH(ch->validity + (at >> 3));
        switch (c->kind) {
        case K_BOOL: PREFETCH(ch->buf1 + (at >> 3)); break;
        case K_DECIMAL128: PREFETCH(ch->buf1 + at * 16); break;
        case K_TIMESTAMP: PREFETCH(ch->buf1 + at * 8); break;
        case K_INT: PREFETCH(ch->buf1 + at * c->p1); break;
        default: /* text: the offsets, or the bytes of a fixed-width value */
            if (c->p2 > 0) PREFETCH(ch->buf2 + l.rel * c->p2);
            else PREFETCH(ch->buf1 + at * c->p1);
            break;
        }
    }
}

static inline void prefetch_text(const Column *cols, int ncols, const Loc *locs) {
    for (int k = 0; k < ncols; k++) {
        const Column *c = &cols[k];
        if ((c->kind != K_STRING && c->kind != K_TEXT && c->kind != K_BINARY) || c->p2 > 0) continue;
        Loc l = locs[c->layout];
        if (l.chunk < 0) continue;
        const Chunk *ch = &c->chunks[l.chunk];
        if (!ch->buf2) continue;
        int64_t s = off_at(ch->buf1, c->p1, ch->offset + l.rel);
        if (s >= 0 && s < ch->len2) PREFETCH(ch->buf2 + s);
    }
}

/*
 * Each row is located once per layout, `ahead` rows before it is written, into
 * a ring of Locs that the text prefetch and the writer then read.
 */
static int write_rows_ring(const Column *cols, int ncols, const Layout *layouts, int nl, const int64_t *perm, int64_t start, int64_t count, Out *o,
                           int64_t *ends, int64_t *bad_row, Loc *ring, int64_t mask, int64_t ahead, int64_t text) {
#define ROW_LOCS(j) (ring + ((j) & mask) * nl)
#define ROW_INDEX(j) (perm ? perm[start + (j)] : start + (j))
    for (int64_t j = 0; j < ahead && j < count; j++) locate_row(layouts, nl, ROW_INDEX(j), j, ROW_LOCS(j));
    for (int64_t r = 0; r < count; r++) {
        if (r + ahead < count) {
            locate_row(layouts, nl, ROW_INDEX(r + ahead), r + ahead, ROW_LOCS(r + ahead));
            if (ahead) prefetch_values(cols, ncols, ROW_LOCS(r + ahead));
        }
        if (perm && r + text < count) prefetch_text(cols, ncols, ROW_LOCS(r + text));
        const Loc *locs = ROW_LOCS(r);
        for (int k = 0; k < ncols; k++) {
            const Column *c = &cols[k];
            Loc l = locs[c->layout];
            if (l.chunk < 0) {
                *bad_row = r;
                return E_INDEX;
            }
            const Chunk *ch = &c->chunks[l.chunk];
            int64_t at = ch->offset + l.rel;
            if (reserve(o, 64)) return E_NOMEM;
            char *p = o->data + o->size;
            if (ch->validity && !((ch->validity[at >> 3] >> (at & 7)) & 1)) {
                p[0] = '\\';
                p[1] = 'N';
                p += 2;
            } else {
                switch (c->kind) {
                case K_INT: {
                    const uint8_t *v = ch->buf1 + at * c->p1;
                    if (c->p2) {
                        int64_t x;
                        if (c->p1 == 8) memcpy(&x, v, 8);
                        else if (c->p1 == 4) { int32_t t; memcpy(&t, v, 4); x = t; }
                        else if (c->p1 == 2) { int16_t t; memcpy(&t, v, 2); x = t; }
                        else x = (int8_t)v[0];
                        p = write_i64(p, x);
                    } else {
                        uint64_t x;
                        if (c->p1 == 8) memcpy(&x, v, 8);
                        else if (c->p1 == 4) { uint32_t t; memcpy(&t, v, 4); x = t; }
                        else if (c->p1 == 2) { uint16_t t; memcpy(&t, v, 2); x = t; }
                        else x = v[0];
                        p = write_u64(p, x);
                    }
                    break;
                }
                case K_BOOL: *p++ = ((ch->buf1[at >> 3] >> (at & 7)) & 1) ? 't' : 'f'; break;
                case K_DECIMAL128: {
                    uint64_t lo;
                    int64_t hi;
                    memcpy(&lo, ch->buf1 + at * 16, 8);
                    memcpy(&hi, ch->buf1 + at * 16 + 8, 8);
                    if (hi == ((int64_t)lo >> 63)) {
                        p = write_i64_scaled(p, (int64_t)lo, c->p1); /* at most 41 bytes (scale <= 38) */
                    } else {
                        i128 v = (i128)(((u128)(uint64_t)hi << 64) | lo);
                        if (reserve(o, 96)) return E_NOMEM;
                        p = o->data + o->size;
                        p = write_scaled(p, v < 0 ? (u128)0 - (u128)v : (u128)v, v < 0, c->p1);
                    }
                    break;
                }
                case K_TIMESTAMP: {
                    int64_t v;
                    memcpy(&v, ch->buf1 + at * 8, 8);
                    int shift = c->p1;
                    if (shift == 0) {
                        p = write_i64(p, v);
                    } else if (shift > 0) {
                        int64_t f = 1;
                        for (int s = 0; s < shift; s++) f *= 10;
                        if (v % f != 0) {
                            *bad_row = r;
                            return E_INEXACT;
                        }
                        p = write_i64(p, v / f);
                    } else { /* exact in 128 bits: |v| < 2**63, factor <= 10**18 */
                        i128 m = 1;
                        for (int s = 0; s < -shift; s++) m *= 10;
                        i128 x = (i128)v * m;
                        p = write_scaled(p, x < 0 ? (u128)0 - (u128)x : (u128)x, x < 0, 0);
                    }
                    break;
                }
                default: { /* STRING, TEXT, BINARY */
                    int64_t s, e;
                    if (c->p2 > 0) {
                        s = l.rel * c->p2;
                        e = s + c->p2;
                    } else {
                        s = off_at(ch->buf1, c->p1, at);
                        e = off_at(ch->buf1, c->p1, at + 1);
                    }
                    if (s < 0 || e < s || e > ch->len2 || (e > s && !ch->buf2)) {
                        *bad_row = r;
                        return E_DATA;
                    }
                    int64_t n = e - s;
                    if (n > 24) { /* the 64 reserved bytes hold 2*24 + 8 (escape scribble) + TAB */
                        if (reserve(o, 2 * (size_t)n + 16)) return E_NOMEM;
                        p = o->data + o->size;
                    }
                    const uint8_t *src = n ? ch->buf2 + s : (const uint8_t *)"";
                    if (c->kind == K_TEXT) {
                        memcpy(p, src, (size_t)n);
                        p += n;
                    } else if (c->kind == K_STRING) {
                        p = write_escaped(p, src, n, n ? ch->len2 - s : 0);
                    } else {
                        *p++ = '\\';
                        *p++ = '\\';
                        *p++ = 'x';
                        for (int64_t b = 0; b < n; b++) {
                            *p++ = HEX[src[b] >> 4];
                            *p++ = HEX[src[b] & 15];
                        }
                    }
                    break;
                }
                }
            }
            *p++ = k + 1 == ncols ? '\n' : '\t';
            o->size = (size_t)(p - o->data);
        }
        if (ends) ends[r] = (int64_t)o->size;
    }
    return E_OK;
#undef ROW_LOCS
#undef ROW_INDEX
}

static int write_rows(const Column *cols, int ncols, const Layout *layouts, int nl, const int64_t *perm, int64_t start, int64_t count, Out *o,
                      int64_t *ends, int64_t *bad_row) {
    int64_t ahead = perm ? PREFETCH_DISTANCE : 0, text = perm ? TEXT_DISTANCE : 0; /* read once: the knob may change meanwhile */
    if (text > ahead) text = ahead;
    int64_t slots = 1;
    while (slots <= ahead) slots <<= 1;
    Loc *ring = malloc(sizeof(Loc) * (size_t)slots * (size_t)(nl ? nl : 1));
    if (!ring) return E_NOMEM;
    int rc = write_rows_ring(cols, ncols, layouts, nl, perm, start, count, o, ends, bad_row, ring, slots - 1, ahead, text);
    free(ring);
    return rc;
}

static PyObject *rowtext_encode(PyObject *self, PyObject *args) {
    PyObject *columns, *perm_obj, *ends_obj = Py_None;
    long long start, count;
    if (!PyArg_ParseTuple(args, "OOLL|O", &columns, &perm_obj, &start, &count, &ends_obj)) return NULL;
    if (start < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "start and count must be >= 0");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(columns, "columns must be a sequence");
    if (!seq) return NULL;
    int ncols = (int)PySequence_Fast_GET_SIZE(seq);
    Views views = {0};
    Column *cols = NULL;
    Layout *layouts = NULL;
    int nlayouts = 0;
    Py_buffer perm_view = {0}, ends_view = {0};
    int have_perm = 0, have_ends = 0;
    int64_t *ends = NULL;
    RowBuffer *result = NULL;
    if (ncols == 0 && count > 0) {
        PyErr_SetString(PyExc_ValueError, "rows without columns");
        goto done;
    }
    cols = PyMem_Calloc(ncols ? ncols : 1, sizeof(Column));
    if (!cols) {
        PyErr_NoMemory();
        goto done;
    }
    for (int k = 0; k < ncols; k++)
        if (parse_column(PySequence_Fast_GET_ITEM(seq, k), &cols[k], &views) < 0) goto done;
    layouts = build_layouts(cols, ncols, &nlayouts);
    if (!layouts) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *perm = NULL;
    int64_t nperm = 0;
    if (perm_obj != Py_None) {
        if (PyObject_GetBuffer(perm_obj, &perm_view, PyBUF_SIMPLE) < 0) goto done;
        have_perm = 1;
        if (perm_view.len % 8 != 0) {
            PyErr_SetString(PyExc_ValueError, "perm must be an int64 buffer");
            goto done;
        }
        perm = (const int64_t *)perm_view.buf;
        nperm = perm_view.len / 8;
        if (start + count > nperm) {
            PyErr_SetString(PyExc_IndexError, "start + count exceeds the permutation");
            goto done;
        }
    }
    if (ends_obj != Py_None) {
        if (PyObject_GetBuffer(ends_obj, &ends_view, PyBUF_WRITABLE) < 0) goto done;
        have_ends = 1;
        if (ends_view.len < count * 8) {
            PyErr_SetString(PyExc_ValueError, "ends must be a writable int64 buffer of at least count values");
            goto done;
        }
        ends = (int64_t *)ends_view.buf;
    }
    result = new_buffer();
    if (!result) goto done;
    size_t want = count ? (size_t)count * (size_t)(ncols * 12) + 64 : 0;
    Out out = start_output(want);
    int64_t bad_row = -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = reserve(&out, want) ? E_NOMEM : E_OK;
    if (rc == E_OK) rc = write_rows(cols, ncols, layouts, nlayouts, perm, start, count, &out, ends, &bad_row);
    Py_END_ALLOW_THREADS
    result = finish_output(result, &out, rc);
    if (rc != E_OK && rc != E_NOMEM) {
        if (rc == E_INDEX) PyErr_Format(PyExc_IndexError, "row %lld: index out of range", (long long)bad_row);
        else if (rc == E_INEXACT) PyErr_Format(PyExc_ValueError, "row %lld: timestamp is not a whole number of the unit", (long long)bad_row);
        else PyErr_Format(PyExc_ValueError, "row %lld: malformed string offsets", (long long)bad_row);
    }
done:
    if (have_perm) PyBuffer_Release(&perm_view);
    if (have_ends) PyBuffer_Release(&ends_view);
    release_views(&views);
    free_layouts(layouts, nlayouts);
    free_columns(cols, ncols);
    Py_DECREF(seq);
    return (PyObject *)result;
}

/* ------------------------------------------------------------------ */
/* whole-row gather                                                    */

/*
 * Rows of a storage-order text in another order. The text is cut into
 * segments of seg_rows rows (encoded on separate threads); row j is in
 * segment j / seg_rows, at [ends[j - 1], ends[j]) of it (0 for the first row
 * of a segment). Per row, its two ends share a cache line or two, and its
 * text one to three more: the ends of the row GATHER_AHEAD rows ahead are
 * prefetched, and the text of the row half as far ahead (its ends are in
 * cache by then).
 */
#define GATHER_AHEAD 16

typedef struct {
    const char **text;
    const int64_t *tlen;
    int64_t nseg, seg_rows;
    const int64_t *ends;
    int64_t nrows;
} Segments;

/* the span of row j: 0 and its segment's text, or -1 when out of range or malformed */
static inline int row_span(const Segments *g, int64_t j, const char **base, int64_t *s, int64_t *e) {
    if (j < 0 || j >= g->nrows) return -1;
    int64_t k = j / g->seg_rows;
    if (k >= g->nseg) return -1;
    *s = j % g->seg_rows ? g->ends[j - 1] : 0;
    *e = g->ends[j];
    *base = g->text[k];
    return (*s < 0 || *e < *s || *e > g->tlen[k]) ? -1 : 0;
}

static int gather_rows(const Segments *g, const int64_t *order, int64_t count, Out *o, int64_t *bad_row) {
    for (int64_t r = 0; r < count; r++) {
        if (r + GATHER_AHEAD < count) {
            int64_t a = order[r + GATHER_AHEAD];
            if (a > 0 && a < g->nrows) PREFETCH(g->ends + a - 1);
        }
        if (r + GATHER_AHEAD / 2 < count) {
            const char *base;
            int64_t s, e;
            if (row_span(g, order[r + GATHER_AHEAD / 2], &base, &s, &e) == 0 && e > s) {
                PREFETCH(base + s);
                if (s + 64 < e) PREFETCH(base + s + 64);
            }
        }
        const char *base;
        int64_t s, e;
        if (row_span(g, order[r], &base, &s, &e) < 0) {
            *bad_row = r;
            return E_DATA;
        }
        if (reserve(o, (size_t)(e - s))) return E_NOMEM;
        memcpy(o->data + o->size, base + s, (size_t)(e - s));
        o->size += (size_t)(e - s);
    }
    return E_OK;
}

static PyObject *rowtext_gather(PyObject *self, PyObject *args) {
    PyObject *texts, *ends_obj, *order_obj;
    long long seg_rows, start, count;
    if (!PyArg_ParseTuple(args, "OLOOLL", &texts, &seg_rows, &ends_obj, &order_obj, &start, &count)) return NULL;
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t nseg = PySequence_Fast_GET_SIZE(seq);
    Views views = {0};
    Py_buffer ev = {0}, ov = {0};
    int have_ends = 0, have_order = 0;
    RowBuffer *result = NULL;
    const char **text = PyMem_Calloc(nseg ? nseg : 1, sizeof(char *));
    int64_t *tlen = PyMem_Calloc(nseg ? nseg : 1, sizeof(int64_t));
    if (!text || !tlen) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total_text = 0;
    for (Py_ssize_t k = 0; k < nseg; k++) {
        Py_ssize_t len;
        text[k] = (const char *)take_view(&views, PySequence_Fast_GET_ITEM(seq, k), &len);
        if (PyErr_Occurred()) goto done;
        tlen[k] = len;
        total_text += len;
    }
    if (PyObject_GetBuffer(ends_obj, &ev, PyBUF_SIMPLE) < 0) goto done;
    have_ends = 1;
    if (PyObject_GetBuffer(order_obj, &ov, PyBUF_SIMPLE) < 0) goto done;
    have_order = 1;
    if (ev.len % 8 || ov.len % 8 || seg_rows < 1) {
        PyErr_SetString(PyExc_ValueError, "ends and order must be int64 buffers, seg_rows >= 1");
        goto done;
    }
    if (start < 0 || count < 0 || start + count > ov.len / 8) {
        PyErr_SetString(PyExc_IndexError, "start + count exceeds the order");
        goto done;
    }
    result = new_buffer();
    if (!result) goto done;
    Segments g = {text, tlen, (int64_t)nseg, seg_rows, (const int64_t *)ev.buf, ev.len / 8};
    size_t want = count && g.nrows ? (size_t)((double)total_text / (double)g.nrows * (double)count * 1.05) + 256 : 0;
    Out out = start_output(want);
    int64_t bad_row = -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = reserve(&out, want) ? E_NOMEM : E_OK;
    if (rc == E_OK) rc = gather_rows(&g, (const int64_t *)ov.buf + start, count, &out, &bad_row);
    Py_END_ALLOW_THREADS
    result = finish_output(result, &out, rc);
    if (rc != E_OK && rc != E_NOMEM) PyErr_Format(PyExc_IndexError, "row %lld: index out of range or malformed row ends", (long long)bad_row);
done:
    if (have_order) PyBuffer_Release(&ov);
    if (have_ends) PyBuffer_Release(&ev);
    release_views(&views);
    PyMem_Free(text);
    PyMem_Free(tlen);
    Py_DECREF(seq);
    return (PyObject *)result;
}

static PyObject *rowtext_set_prefetch_distance(PyObject *self, PyObject *args) {
    int values, text;
    if (!PyArg_ParseTuple(args, "ii", &values, &text)) return NULL;
    if (values < 0 || values > 1024 || text < 0 || text > values) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= text <= values <= 1024");
        return NULL;
    }
    PyObject *previous = Py_BuildValue("ii", PREFETCH_DISTANCE, TEXT_DISTANCE);
    PREFETCH_DISTANCE = values;
    TEXT_DISTANCE = text;
    return previous;
}

static PyMethodDef rowtext_methods[] = {
    {"_set_prefetch_distance", rowtext_set_prefetch_distance, METH_VARARGS,
     "_set_prefetch_distance(values, text) -> previous: rows ahead whose values / text bytes are prefetched (tuning)."},
    {"encode", rowtext_encode, METH_VARARGS,
     "encode(columns, perm, start, count) -> Buffer: canonical row text of rows start..start+count (see the module source)."},
    {"gather", rowtext_gather, METH_VARARGS,
     "gather(texts, seg_rows, ends, order, start, count) -> Buffer: rows order[start..start+count) of a storage-order text (see the source)."},
    {"trim", rowtext_trim, METH_NOARGS, "trim(): free the pooled output buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef rowtext_module = {PyModuleDef_HEAD_INIT, "_rowtext", "Canonical row text, one compiled pass.", -1, rowtext_methods};

PyMODINIT_FUNC PyInit__rowtext(void) {
    memset(ESCAPE, 0, sizeof(ESCAPE));
    ESCAPE['\\'] = '\\';
    ESCAPE['\b'] = 'b';
    ESCAPE['\f'] = 'f';
    ESCAPE['\n'] = 'n';
    ESCAPE['\r'] = 'r';
    ESCAPE['\t'] = 't';
    ESCAPE['\v'] = 'v';
    if (PyType_Ready(&RowBufferType) < 0) return NULL;
    PyObject *m = PyModule_Create(&rowtext_module);
    if (!m) return NULL;
    Py_INCREF(&RowBufferType);
    if (PyModule_AddObject(m, "Buffer", (PyObject *)&RowBufferType) < 0) {
        Py_DECREF(&RowBufferType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "INT", K_INT);
    PyModule_AddIntConstant(m, "BOOL", K_BOOL);
    PyModule_AddIntConstant(m, "STRING", K_STRING);
    PyModule_AddIntConstant(m, "TEXT", K_TEXT);
    PyModule_AddIntConstant(m, "BINARY", K_BINARY);
    PyModule_AddIntConstant(m, "DECIMAL128", K_DECIMAL128);
    PyModule_AddIntConstant(m, "TIMESTAMP", K_TIMESTAMP);
    return m;
}
