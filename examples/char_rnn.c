/* char_rnn: a character-level language model trained on a text corpus: an LSTM (default) or a
 * small causal Transformer (--model transformer). After each epoch it reports the validation
 * loss, perplexity and next-character accuracy on held-out text and prints a sample.
 *
 *     build/bin/char_rnn --epochs 3                        (Debian's fortunes, LSTM)
 *     build/bin/char_rnn --model transformer --data book.txt --save lm.safetensors
 *
 * Data: --data is a text file, or a directory whose plain files are read in name order
 * (default /usr/share/games/fortunes from the `fortunes` package; the .dat index files, the
 * .u8 copies and subdirectories are skipped). The characters are bytes; the vocabulary is the
 * set of bytes that occur. The last 10% of the text is held out for validation.
 * Models (PyTorch module names in brackets):
 *   lstm:        Embedding(V, 64) -> LSTM(64, 256, batch_first) -> Linear(256, V)
 *   transformer: Embedding(V, 128) + learned position Embedding(seq_len, 128) ->
 *                TransformerEncoder(2 x TransformerEncoderLayer(128, 4 heads, ff 512,
 *                norm_first, batch_first), LayerNorm) with a causal mask -> Linear(128, V)
 * Training: Adam with gradients clipped to norm 1; an epoch is --steps batches of random
 * windows. The last line printed is
 * `final: test_accuracy=A train_seconds=S epochs=N` (A: next-character accuracy, 4 decimals). */
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <prometorch/prometorch.h>

typedef struct options {
    const char *data;  /* a text file or a directory of text files */
    const char *model; /* "lstm" or "transformer" */
    int epochs;
    int64_t steps; /* training batches per epoch */
    int64_t batch_size;
    int64_t seq_len; /* characters per training window */
    double lr;
    const char *device;
    int threads;
    const char *save;
    uint64_t seed;
    int64_t limit;        /* > 0: cap training steps and validation batches (quick checks) */
    int64_t eval_batches; /* validation batches per evaluation */
    int64_t sample_len;   /* characters sampled after each epoch */
    double temperature;
} options;

static void usage(FILE *f)
{
    fprintf(f, "usage: char_rnn [options]\n"
               "  --data PATH       text file or directory (default /usr/share/games/fortunes)\n"
               "  --model NAME      lstm (default) or transformer\n"
               "  --epochs N        epochs (default 1)\n"
               "  --steps N         training batches per epoch (default 300)\n"
               "  --batch-size N    windows per batch (default 32)\n"
               "  --seq-len N       characters per window (default 64)\n"
               "  --lr X            Adam learning rate (default 2e-3 lstm, 1e-3 transformer)\n"
               "  --device D        cpu, cuda, cuda:N ... (default cpu)\n"
               "  --threads N       CPU threads (default: all cores)\n"
               "  --save FILE       write the weights to FILE and the curves to FILE without its\n"
               "                    .pt / .safetensors extension + .svg: a PyTorch state dict\n"
               "                    when FILE ends in .pt (weights only), else safetensors\n"
               "                    with the vocabulary and model kind in its metadata\n"
               "  --seed N          random seed (default 0): same seed, same results\n"
               "  --limit N         cap training steps and validation batches at N (quick checks)\n"
               "  --eval-batches N  validation batches per evaluation (default 50)\n"
               "  --sample N        characters to sample after each epoch (default 300)\n"
               "  --temperature X   sampling temperature (default 0.8)\n"
               "  --help            this text\n");
}

/* Returns 0 to run, 1 to exit successfully (--help), -1 on a bad option. */
static int parse_options(int argc, char **argv, options *o)
{
    static const struct option longopts[] = {
        {"data", required_argument, NULL, 'd'},
        {"model", required_argument, NULL, 'm'},
        {"epochs", required_argument, NULL, 'e'},
        {"steps", required_argument, NULL, 'n'},
        {"batch-size", required_argument, NULL, 'b'},
        {"seq-len", required_argument, NULL, 'T'},
        {"lr", required_argument, NULL, 'l'},
        {"device", required_argument, NULL, 'D'},
        {"threads", required_argument, NULL, 't'},
        {"save", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"limit", required_argument, NULL, 'L'},
        {"eval-batches", required_argument, NULL, 'E'},
        {"sample", required_argument, NULL, 'g'},
        {"temperature", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.data = "/usr/share/games/fortunes",
                   .model = "lstm",
                   .epochs = 1,
                   .steps = 300,
                   .batch_size = 32,
                   .seq_len = 64,
                   .device = "cpu",
                   .eval_batches = 50,
                   .sample_len = 300,
                   .temperature = 0.8};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->data = optarg; break;
        case 'm': o->model = optarg; break;
        case 'e': o->epochs = atoi(optarg); break;
        case 'n': o->steps = atoll(optarg); break;
        case 'b': o->batch_size = atoll(optarg); break;
        case 'T': o->seq_len = atoll(optarg); break;
        case 'l': o->lr = atof(optarg); break;
        case 'D': o->device = optarg; break;
        case 't': o->threads = atoi(optarg); break;
        case 's': o->save = optarg; break;
        case 'S': o->seed = strtoull(optarg, NULL, 10); break;
        case 'L': o->limit = atoll(optarg); break;
        case 'E': o->eval_batches = atoll(optarg); break;
        case 'g': o->sample_len = atoll(optarg); break;
        case 'p': o->temperature = atof(optarg); break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (strcmp(o->model, "lstm") != 0 && strcmp(o->model, "transformer") != 0) {
        fprintf(stderr, "char_rnn: --model must be lstm or transformer, not '%s'\n", o->model);
        return -1;
    }
    if (o->lr == 0)
        o->lr = strcmp(o->model, "lstm") == 0 ? 2e-3 : 1e-3;
    if (o->limit > 0) {
        o->steps = o->steps < o->limit ? o->steps : o->limit;
        o->eval_batches = o->eval_batches < o->limit ? o->eval_batches : o->limit;
    }
    if (optind < argc || o->epochs < 1 || o->steps < 1 || o->batch_size < 1 || o->seq_len < 2 ||
        !(o->lr > 0) || o->eval_batches < 1 || o->sample_len < 0 || !(o->temperature > 0)) {
        fprintf(stderr, "char_rnn: bad arguments\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

static int fail(const char *what)
{
    fprintf(stderr, "char_rnn: %s: %s\n", what, pt_last_error());
    return 1;
}

/* ---- the corpus -------------------------------------------------------------------------- */

typedef struct corpus {
    int64_t *ids;             /* the text as vocabulary indices */
    int64_t n;                /* characters */
    int64_t n_train;          /* the first n_train are for training, the rest for validation */
    int vocab;                /* distinct bytes */
    unsigned char chars[256]; /* index -> byte */
} corpus;

/* Appends the file at path to *buf (grown with realloc). Returns false on a read error. */
static bool append_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        char *grown = realloc(*buf, *len + got);
        if (!grown) {
            fclose(f);
            return false;
        }
        *buf = grown;
        memcpy(*buf + *len, chunk, got);
        *len += got;
    }
    bool ok = !ferror(f);
    fclose(f);
    return ok;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Reads path (a file, or every plain file of a directory in name order, skipping hidden
 * names, *.dat and *.u8) into one malloc'd buffer. */
static char *read_text(const char *path, size_t *len)
{
    struct stat st;
    char *buf = NULL;
    *len = 0;
    if (stat(path, &st) != 0)
        return NULL;
    if (!S_ISDIR(st.st_mode))
        return append_file(path, &buf, len) ? buf : (free(buf), NULL);
    DIR *d = opendir(path);
    if (!d)
        return NULL;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || ends_with(e->d_name, ".dat") || ends_with(e->d_name, ".u8"))
            continue;
        char **grown = realloc(names, (n + 1) * sizeof(*names));
        if (!grown)
            break;
        names = grown;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), compare_names);
    for (size_t i = 0; i < n; i++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s/%s", path, names[i]);
        if (names[i] && stat(file, &st) == 0 && S_ISREG(st.st_mode))
            append_file(file, &buf, len);
        free(names[i]);
    }
    free(names);
    return buf;
}

/* Loads the text, builds the byte vocabulary and splits 90% / 10%. */
static bool load_corpus(const char *path, int64_t seq_len, corpus *c)
{
    size_t len;
    char *text = read_text(path, &len);
    if (!text || (int64_t)len < 20 * (seq_len + 1)) {
        fprintf(stderr,
                "char_rnn: cannot read enough text from '%s' (%zu bytes; install the "
                "fortunes package or pass --data FILE)\n",
                path, text ? len : 0);
        free(text);
        return false;
    }
    int index[256];
    bool seen[256] = {false};
    for (size_t i = 0; i < len; i++)
        seen[(unsigned char)text[i]] = true;
    c->vocab = 0;
    for (int b = 0; b < 256; b++)
        if (seen[b]) {
            index[b] = c->vocab;
            c->chars[c->vocab++] = (unsigned char)b;
        }
    c->ids = malloc(len * sizeof(int64_t));
    if (!c->ids) {
        free(text);
        return false;
    }
    for (size_t i = 0; i < len; i++)
        c->ids[i] = index[(unsigned char)text[i]];
    c->n = (int64_t)len;
    c->n_train = c->n - c->n / 10;
    free(text);
    return true;
}

/* A batch of windows starting at starts[0..B): x = ids[s .. s+T), y = ids[s+1 .. s+T+1),
 * both int64 [B, T] on dev. `buf` holds 2 * B * T int64 of scratch. */
static void make_batch(const corpus *c, const int64_t *starts, int64_t B, int64_t T, int64_t *buf,
                       pt_device dev, pt_tensor **x, pt_tensor **y)
{
    for (int64_t b = 0; b < B; b++) {
        memcpy(buf + b * T, c->ids + starts[b], (size_t)T * sizeof(int64_t));
        memcpy(buf + (B + b) * T, c->ids + starts[b] + 1, (size_t)T * sizeof(int64_t));
    }
    pt_tensor *xh = pt_from_data(buf, PT_SHAPE(B, T), PT_INT64, pt_cpu());
    pt_tensor *yh = pt_from_data(buf + B * T, PT_SHAPE(B, T), PT_INT64, pt_cpu());
    *x = pt_to(xh, dev);
    *y = pt_to(yh, dev);
}

/* ---- the models -------------------------------------------------------------------------- */

/* CharLSTM: children 0 embed, 1 lstm, 2 fc. x [B, T] int64 -> logits [B, T, V]. */
static pt_tensor *char_lstm_forward(pt_module *self, const pt_tensor *x)
{
    pt_tensor *e = pt_nn_forward(pt_nn_child_at(self, 0, NULL), x); /* [B, T, 64] */
    pt_tensor *h = pt_nn_forward(pt_nn_child_at(self, 1, NULL), e); /* [B, T, 256] */
    pt_release(e);
    pt_tensor *logits = pt_nn_forward(pt_nn_child_at(self, 2, NULL), h);
    pt_release(h);
    return logits;
}

static const pt_module_def char_lstm_def = {.type_name = "CharLSTM", .forward = char_lstm_forward};

static pt_module *char_lstm(int vocab)
{
    pt_module *m = pt_nn_module_new(&char_lstm_def, NULL);
    pt_rnn_opts lstm = PT_RNN_DEFAULTS;
    lstm.batch_first = true;
    pt_status st = m ? pt_nn_add(m, "embed", pt_nn_embedding(vocab, 64)) : pt_last_status();
    if (st == PT_OK)
        st = pt_nn_add(m, "lstm", pt_nn_lstm(64, 256, &lstm));
    if (st == PT_OK)
        st = pt_nn_add(m, "fc", pt_nn_linear(256, vocab, true));
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* CharTransformer: children 0 embed, 1 pos (learned positions), 2 encoder, 3 fc.
 * x [B, T] int64 (T <= the seq_len it was built for) -> logits [B, T, V]. */
static pt_tensor *char_transformer_forward(pt_module *self, const pt_tensor *x)
{
    int64_t T = pt_size(x, 1);
    pt_device dev = pt_device_of(x);
    pt_tensor *positions = pt_arange(0, (double)T, 1, PT_INT64, dev);         /* [T] */
    pt_tensor *tok = pt_nn_forward(pt_nn_child_at(self, 0, NULL), x);         /* [B, T, D] */
    pt_tensor *pos = pt_nn_forward(pt_nn_child_at(self, 1, NULL), positions); /* [T, D] */
    pt_tensor *h = pt_add(tok, pos);
    /* causal mask: -inf above the diagonal, so position t attends to 0..t only */
    pt_tensor *cpu_mask = pt_nn_transformer_square_subsequent_mask(T); /* [T, T] */
    pt_tensor *mask = pt_to(cpu_mask, dev);
    const pt_tensor *in[3] = {h, mask, NULL};
    pt_tensor *out = NULL;
    pt_status st = h && mask ? pt_nn_forward_n(pt_nn_child_at(self, 2, NULL), 3, in, 1, &out)
                             : pt_last_status();
    pt_tensor *logits = st == PT_OK ? pt_nn_forward(pt_nn_child_at(self, 3, NULL), out) : NULL;
    pt_release(positions);
    pt_release(tok);
    pt_release(pos);
    pt_release(h);
    pt_release(cpu_mask);
    pt_release(mask);
    pt_release(out);
    return logits;
}

static const pt_module_def char_transformer_def = {.type_name = "CharTransformer",
                                                   .forward = char_transformer_forward};

static pt_module *char_transformer(int vocab, int64_t max_len)
{
    const int64_t d = 128;
    pt_transformer_layer_opts lo = PT_TRANSFORMER_LAYER_DEFAULTS;
    lo.dim_feedforward = 4 * d;
    lo.batch_first = true;
    lo.norm_first = true; /* pre-norm trains more stably for small LMs */
    pt_module *m = pt_nn_module_new(&char_transformer_def, NULL);
    pt_status st = m ? pt_nn_add(m, "embed", pt_nn_embedding(vocab, d)) : pt_last_status();
    if (st == PT_OK)
        st = pt_nn_add(m, "pos", pt_nn_embedding(max_len, d));
    if (st == PT_OK)
        st = pt_nn_add(m, "encoder",
                       pt_nn_transformer_encoder(pt_nn_transformer_encoder_layer(d, 4, &lo), 2,
                                                 pt_nn_layer_norm(1, (int64_t[]){d})));
    if (st == PT_OK)
        st = pt_nn_add(m, "fc", pt_nn_linear(d, vocab, true));
    if (st != PT_OK) {
        pt_nn_free(m);
        return NULL;
    }
    return m;
}

/* ---- training, evaluation, sampling ------------------------------------------------------ */

/* Cross-entropy of logits [B, T, V] against y [B, T] (flattened to B*T samples). */
static pt_tensor *lm_loss(const pt_tensor *logits, const pt_tensor *y, pt_reduction reduction)
{
    int64_t V = pt_size(logits, 2);
    pt_tensor *flat_logits = pt_reshape(logits, PT_SHAPE(-1, V));
    pt_tensor *flat_y = pt_reshape(y, PT_SHAPE(-1));
    pt_cross_entropy_opts ce = {.reduction = reduction};
    pt_tensor *loss = pt_cross_entropy_ex(flat_logits, flat_y, &ce);
    pt_release(flat_logits);
    pt_release(flat_y);
    return loss;
}

/* One epoch of o->steps batches of random training windows (start offsets drawn from the
 * library generator, so --seed reproduces them). buf and starts are scratch (make_batch). */
static pt_status train_epoch(pt_module *model, pt_optim *opt, const corpus *c, pt_device dev,
                             const options *o, int epoch, int64_t *buf, int64_t *starts,
                             double *mean_loss, double *seconds)
{
    char label[32];
    snprintf(label, sizeof(label), "epoch %d/%d", epoch, o->epochs);
    pt_progress *bar = pt_progress_new(label, o->steps, o->batch_size * o->seq_len);
    pt_nn_train(model, true);
    pt_status st = PT_OK;
    for (int64_t step = 1; step <= o->steps && st == PT_OK; step++) {
        double loss_value = 0;
        pt_scope_begin();
        pt_tensor *s =
            pt_randint(0, c->n_train - o->seq_len - 1, PT_SHAPE(o->batch_size), PT_INT64, pt_cpu());
        st = pt_copy_to_host(s, starts, (size_t)o->batch_size * sizeof(int64_t));
        pt_tensor *x = NULL, *y = NULL;
        if (st == PT_OK)
            make_batch(c, starts, o->batch_size, o->seq_len, buf, dev, &x, &y);
        pt_tensor *loss =
            st == PT_OK ? lm_loss(pt_nn_forward(model, x), y, PT_REDUCTION_MEAN) : NULL;
        if (st == PT_OK && !loss)
            st = pt_last_status();
        if (st == PT_OK) {
            pt_optim_zero_grad(opt);
            st = pt_backward(loss, NULL, false, false);
        }
        /* rescale the gradients to a total norm of at most 1 (a guard against the occasional
         * exploding gradient of recurrent nets), then step */
        if (st == PT_OK)
            st = pt_nn_clip_grad_norm_(model, 1.0, 2.0, false, NULL);
        if (st == PT_OK)
            st = pt_optim_step(opt);
        if (st == PT_OK)
            loss_value = pt_item(loss);
        pt_scope_end();
        pt_progress_update(bar, step, loss_value);
    }
    *mean_loss = pt_progress_mean_loss(bar);
    *seconds = pt_progress_elapsed(bar);
    pt_progress_finish(bar);
    return st;
}

/* Mean loss and next-character accuracy over consecutive validation windows. */
static pt_status evaluate(pt_module *model, const corpus *c, pt_device dev, const options *o,
                          int64_t *buf, int64_t *starts, double *mean_loss, double *accuracy)
{
    const int64_t B = o->batch_size, T = o->seq_len;
    /* windows [n_train + k*T, n_train + (k+1)*T] for k < windows (x and its shifted y) */
    int64_t windows = (c->n - c->n_train - 1) / T;
    int64_t batches = windows / B < o->eval_batches ? windows / B : o->eval_batches;
    if (batches < 1)
        batches = 1; /* short text: one batch, windows repeated */
    pt_nn_eval(model);
    pt_no_grad_begin();
    double loss_sum = 0;
    int64_t correct = 0, total = 0;
    pt_status st = PT_OK;
    for (int64_t b = 0; b < batches && st == PT_OK; b++) {
        pt_scope_begin();
        for (int64_t i = 0; i < B; i++)
            starts[i] = c->n_train + ((b * B + i) % windows) * T;
        pt_tensor *x, *y;
        make_batch(c, starts, B, T, buf, dev, &x, &y);
        pt_tensor *logits = pt_nn_forward(model, x);
        pt_tensor *loss = lm_loss(logits, y, PT_REDUCTION_SUM);
        pt_tensor *hits = pt_sum(pt_eq(pt_argmax(logits, 2, false), y));
        if (loss && hits) {
            loss_sum += pt_item(loss);
            correct += (int64_t)pt_item(hits);
            total += B * T;
        } else {
            st = pt_last_status();
        }
        pt_scope_end();
    }
    pt_no_grad_end();
    *mean_loss = total ? loss_sum / (double)total : NAN;
    *accuracy = total ? (double)correct / (double)total : 0;
    return st;
}

/* Prints o->sample_len characters sampled from the model, starting after a newline, each drawn
 * from softmax(logits / temperature) of the last o->seq_len characters. */
static pt_status sample_text(pt_module *model, const corpus *c, pt_device dev, const options *o)
{
    int64_t *ctx = malloc((size_t)(o->sample_len + 1) * sizeof(int64_t));
    if (!ctx) {
        fprintf(stderr, "char_rnn: out of memory\n");
        return PT_ERR_OOM;
    }
    const unsigned char *nl = memchr(c->chars, '\n', (size_t)c->vocab);
    ctx[0] = nl ? nl - c->chars : 0;
    pt_nn_eval(model);
    pt_no_grad_begin();
    pt_status st = PT_OK;
    printf("---- sample ----\n");
    for (int64_t i = 1; i <= o->sample_len && st == PT_OK; i++) {
        pt_scope_begin();
        int64_t start = i > o->seq_len ? i - o->seq_len : 0;
        pt_tensor *xh = pt_from_data(ctx + start, PT_SHAPE(1, i - start), PT_INT64, pt_cpu());
        pt_tensor *logits = pt_nn_forward(model, pt_to(xh, dev));    /* [1, t, V] */
        pt_tensor *last = pt_select(pt_select(logits, 0, 0), 0, -1); /* [V] */
        pt_tensor *probs = pt_softmax(pt_div_scalar(last, o->temperature), 0);
        pt_tensor *next = pt_multinomial(pt_to(probs, pt_cpu()), 1, false);
        if (next) {
            ctx[i] = (int64_t)pt_item(next);
            putchar(c->chars[ctx[i]]);
        } else {
            st = pt_last_status();
        }
        pt_scope_end();
    }
    printf("\n----------------\n");
    pt_no_grad_end();
    free(ctx);
    return st;
}

/* Weights + vocabulary (safetensors metadata "vocab": the byte values, comma-separated; a .pt
 * file holds the state dict alone) and the curves. */
static pt_status save_results(pt_module *model, const corpus *c, const options *o, int epochs,
                              const double *train_loss, const double *val_loss,
                              const double *val_acc)
{
    char vocab[256 * 4 + 1] = "";
    size_t len = 0;
    for (int i = 0; i < c->vocab; i++)
        len +=
            (size_t)snprintf(vocab + len, sizeof(vocab) - len, "%s%d", i ? "," : "", c->chars[i]);
    pt_value *meta = pt_value_dict();
    pt_status st = meta ? PT_OK : pt_last_status();
    if (st == PT_OK)
        st = pt_value_dict_set_str(meta, "vocab", pt_value_str(vocab));
    if (st == PT_OK)
        st = pt_value_dict_set_str(meta, "model", pt_value_str(o->model));
    pt_value *sd = st == PT_OK ? pt_nn_state_dict(model) : NULL;
    if (st == PT_OK)
        st = !sd                         ? pt_last_status()
             : ends_with(o->save, ".pt") ? pt_save(o->save, sd)
                                         : pt_save_safetensors(o->save, sd, meta);
    pt_value_free(sd);
    pt_value_free(meta);
    if (st != PT_OK)
        return st;
    char svg[4096];
    size_t n = strlen(o->save);
    if (ends_with(o->save, ".safetensors"))
        n -= strlen(".safetensors");
    else if (ends_with(o->save, ".pt"))
        n -= strlen(".pt");
    snprintf(svg, sizeof(svg), "%.*s.svg", (int)n, o->save);
    pt_plot_series curves[] = {
        {.name = "train loss", .n = epochs, .y = train_loss},
        {.name = "validation loss", .n = epochs, .y = val_loss},
        {.name = "next-char accuracy", .n = epochs, .y = val_acc, .panel = 1},
    };
    st = pt_plot_svg(svg, strcmp(o->model, "lstm") == 0 ? "char LSTM" : "char Transformer", "epoch",
                     3, curves);
    if (st == PT_OK)
        printf("saved %s and %s\n", o->save, svg);
    return st;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* epoch lines show up at once in a log file too */
    options o;
    int r = parse_options(argc, argv, &o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    pt_manual_seed(o.seed);
    if (o.threads > 0)
        pt_set_num_threads(o.threads);
    pt_clear_error();
    pt_device dev = pt_device_parse(o.device);
    if (pt_last_status() != PT_OK || !pt_device_available(dev))
        return fprintf(stderr, "char_rnn: device '%s' is not available\n", o.device), 1;

    corpus c = {0};
    if (!load_corpus(o.data, o.seq_len, &c))
        return 1;
    bool lstm = strcmp(o.model, "lstm") == 0;
    pt_module *model = lstm ? char_lstm(c.vocab) : char_transformer(c.vocab, o.seq_len);
    if (!model || pt_nn_to(model, dev) != PT_OK)
        return fail("building the model");
    pt_nn_print(model);
    printf("%lld parameters; %lld characters (%lld for validation), vocabulary %d, device %s\n",
           (long long)pt_nn_num_parameters(model), (long long)c.n, (long long)(c.n - c.n_train),
           c.vocab, o.device);
    pt_adam_opts adam = PT_ADAM_DEFAULTS;
    adam.lr = o.lr;
    pt_optim *opt = pt_optim_adam(model, adam);
    if (!opt)
        return fail("creating the optimizer");

    int64_t *buf = malloc((size_t)(2 * o.batch_size * o.seq_len) * sizeof(int64_t));
    int64_t *starts = malloc((size_t)o.batch_size * sizeof(int64_t));
    double *train_loss = calloc((size_t)o.epochs, sizeof(double));
    double *val_loss = calloc((size_t)o.epochs, sizeof(double));
    double *val_acc = calloc((size_t)o.epochs, sizeof(double));
    double train_seconds = 0, acc = 0;
    int status = buf && starts && train_loss && val_loss && val_acc ? 0 : 1;
    for (int epoch = 1; epoch <= o.epochs && status == 0; epoch++) {
        double seconds = 0, loss = 0;
        if (train_epoch(model, opt, &c, dev, &o, epoch, buf, starts, &train_loss[epoch - 1],
                        &seconds))
            status = fail("training");
        else if (evaluate(model, &c, dev, &o, buf, starts, &loss, &acc))
            status = fail("evaluating");
        else
            printf("epoch %d: train loss %.4f, validation loss %.4f (perplexity %.2f), "
                   "next-char accuracy %.4f (%.1f s)\n",
                   epoch, train_loss[epoch - 1], loss, exp(loss), acc, seconds);
        if (status == 0 && o.sample_len > 0 && sample_text(model, &c, dev, &o) != PT_OK)
            status = fail("sampling");
        train_seconds += seconds;
        val_loss[epoch - 1] = loss;
        val_acc[epoch - 1] = acc;
    }
    if (status == 0 && o.save &&
        save_results(model, &c, &o, o.epochs, train_loss, val_loss, val_acc) != PT_OK)
        status = fail("saving");
    if (status == 0)
        printf("final: test_accuracy=%.4f train_seconds=%.1f epochs=%d\n", acc, train_seconds,
               o.epochs);

    free(buf);
    free(starts);
    free(train_loss);
    free(val_loss);
    free(val_acc);
    free(c.ids);
    pt_optim_free(opt);
    pt_nn_free(model);
    return status;
}
