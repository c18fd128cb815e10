/* `vario perf MODEL.onnx`: latency percentiles, throughput and achieved
 * GFLOP/s of one session configuration on synthetic inputs (like trtexec
 * or onnxruntime_perf_test). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hist.h"
#include "base/npy.h"
#include "cli/commands.h"
#include "vario/engine.h"

static void usage(void) {
  fprintf(stderr,
          "usage: vario perf MODEL.onnx [--threads N] [--batch B]\n"
          "                  [--precision fp32|bf16|int8] [--calibration cal.npy]\n"
          "                  [--duration S] [--warmup W] [--json] [--nodes]\n"
          "                  [--sessions K] [--range BEGIN:END]\n"
          "Inputs are deterministic pseudo-random values in [-1, 1) (integer\n"
          "inputs: zeros). --nodes prints per-node mean times. --sessions K runs\n"
          "K independent sessions (each with --threads) in K threads at once and\n"
          "reports their combined throughput (thread-limit check). --range runs\n"
          "only nodes [BEGIN, END) of the optimised graph (a partial session;\n"
          "node indices as listed by --nodes).\n"
          "       vario perf MODEL.onnx --blocks [...]: AsyFunc layer blocks\n"
          "(see `vario perf MODEL.onnx --blocks --help`).\n");
}

typedef struct perf_opts {
  const char *model, *cal;
  int threads, batch, json, nodes, warmup, sessions, rb, re;
  double seconds;
  vr_precision prec;
} perf_opts;

static int parse(int argc, char **argv, perf_opts *p) {
  memset(p, 0, sizeof *p);
  p->threads = 1;
  p->batch = 1;
  p->seconds = 3;
  p->warmup = 3;
  p->sessions = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--threads") && more) {
      if (vr__cli_int("perf", a, argv[++i], 1, 1024, &p->threads)) return 2;
    } else if (!strcmp(a, "--batch") && more) {
      if (vr__cli_int("perf", a, argv[++i], 1, 65536, &p->batch)) return 2;
    } else if ((!strcmp(a, "--duration") || !strcmp(a, "--seconds")) && more) {
      /* --seconds: deprecated alias */
      if (vr__cli_num("perf", a, argv[++i], 0, 1e6, &p->seconds)) return 2;
    } else if (!strcmp(a, "--warmup") && more) {
      if (vr__cli_int("perf", a, argv[++i], 0, 1000000, &p->warmup)) return 2;
    } else if (!strcmp(a, "--sessions") && more) {
      if (vr__cli_int("perf", a, argv[++i], 1, 64, &p->sessions)) return 2;
    }
    else if (!strcmp(a, "--range") && more) {
      if (sscanf(argv[++i], "%d:%d", &p->rb, &p->re) != 2) {
        fprintf(stderr, "vario perf: --range wants BEGIN:END\n");
        return 2;
      }
    }
    else if (!strcmp(a, "--calibration") && more) p->cal = argv[++i];
    else if (!strcmp(a, "--precision") && more) {
      if (vr_precision_parse(argv[++i], &p->prec)) {
        fprintf(stderr, "vario perf: unknown precision '%s'\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(a, "--json")) p->json = 1;
    else if (!strcmp(a, "--nodes")) p->nodes = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 1; }
    else if (a[0] != '-' && !p->model) p->model = a;
    else { fprintf(stderr, "vario perf: unexpected argument '%s'\n", a); usage(); return 2; }
  }
  if (!p->model || p->threads < 1 || p->batch < 1 || p->seconds < 0 || p->warmup < 0 ||
      p->sessions < 1 || p->sessions > 64) {
    usage();
    return 2;
  }
  return 0;
}

/* Synthetic inputs for batch b, one buffer per session input. */
static int make_inputs(vr_session *s, int b, vr_tensor *t, void **bufs) {
  uint32_t x = 12345;
  for (int i = 0; i < vr_session_num_inputs(s); i++) {
    const vr_tensor_info *in = vr_session_input(s, i);
    t[i] = (vr_tensor){in->name, in->dtype, in->ndim, {0}, NULL, 0};
    int64_t n = 1;
    for (int d = 0; d < in->ndim; d++) {
      t[i].shape[d] = in->shape[d] < 0 ? b : in->shape[d];
      n *= t[i].shape[d];
    }
    t[i].nbytes = (size_t)n * vr_dtype_size(in->dtype);
    bufs[i] = vr_aligned_alloc(64, t[i].nbytes ? t[i].nbytes : 64);
    if (!bufs[i]) return VR_ENOMEM;
    memset(bufs[i], 0, t[i].nbytes);
    if (in->dtype == VR_DT_F32)
      for (int64_t k = 0; k < n; k++) {
        x = x * 1664525u + 1013904223u;
        ((float *)bufs[i])[k] = (float)(x >> 8) / (float)(1 << 23) - 1.0f;
      }
    t[i].data = bufs[i];
  }
  return 0;
}

/* Nodes [b, e) of the session (the whole graph when b == e == 0). */
static void node_range(const perf_opts *p, const vr_model *m, int *b, int *e) {
  *b = p->rb;
  *e = p->rb == 0 && p->re == 0 ? vr_model_num_nodes(m) : p->re;
}

static int64_t range_flops(const perf_opts *p, const vr_model *m) {
  int b, e;
  node_range(p, m, &b, &e);
  int64_t f = 0;
  for (int i = b; i < e; i++) f += vr_model_node(m, i)->flops;
  return f;
}

static void print_nodes(const perf_opts *p, const vr_model *m, vr_session *s) {
  int b, e;
  node_range(p, m, &b, &e);
  double *ms = vr_calloc((size_t)(e - b) + 1, sizeof(double));
  if (!ms || vr_session_node_times(s, ms, e - b)) {
    vr_free(ms);
    return;
  }
  printf("%-5s %-40s %-28s %10s %12s %10s\n", "node", "name", "op", "ms", "MFLOP/sample",
         "weight KiB");
  for (int i = b; i < e; i++) {
    const vr_node_info *ni = vr_model_node(m, i);
    printf("%-5d %-40.40s %-28.28s %10.4f %12.2f %10.1f\n", i, ni->name, ni->op_type,
           ms[i - b], (double)ni->flops / 1e6, (double)ni->weight_bytes / 1024.0);
  }
  vr_free(ms);
}

/* Process CPU seconds (user + system), for cores actually used. */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static int measure(perf_opts *p, const vr_model *m, vr_session *s, vr_tensor *in) {
  vr_errbuf err = {0};
  vr_tensor out[64];
  int nin = vr_session_num_inputs(s);
  for (int i = 0; i < p->warmup; i++)
    if (vr_session_run(s, p->batch, in, nin, out, 64, &err)) goto fail;
  vr_hist *h = vr_malloc(sizeof(vr_hist));
  if (!h) return 1;
  vr_hist_init(h);
  if (p->nodes) vr_session_set_profiling(s, 1);
  double c0 = cpu_seconds();
  int64_t t0 = vr_now_ns(), deadline = t0 + (int64_t)(p->seconds * 1e9);
  int64_t runs = 0;
  do {
    int64_t a = vr_now_ns();
    if (vr_session_run(s, p->batch, in, nin, out, 64, &err)) {
      vr_free(h);
      goto fail;
    }
    vr_hist_record(h, (uint64_t)(vr_now_ns() - a));
    runs++;
  } while (vr_now_ns() < deadline || runs < 3);
  double wall = (double)(vr_now_ns() - t0) / 1e9;
  double cores = (cpu_seconds() - c0) / wall; /* average cores busy */
  double thr = (double)runs * p->batch / wall;
  double gflops = thr * (double)range_flops(p, m) / 1e9;
  double p50 = vr_hist_quantile(h, 0.5) / 1e6, p90 = vr_hist_quantile(h, 0.9) / 1e6,
         p99 = vr_hist_quantile(h, 0.99) / 1e6;
  if (p->json) {
    printf("{\"model\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"batch\":%d,"
           "\"runs\":%lld,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,"
           "\"mean_ms\":%.4f,\"throughput\":%.3f,\"gflops\":%.3f,"
           "\"flops_per_sample\":%lld,\"memory_bytes\":%lld,\"cpu_cores\":%.2f,"
           "\"gflops_per_core\":%.3f}\n",
           p->model, vr_precision_name(p->prec), p->threads, p->batch, (long long)runs, p50,
           p90, p99, vr_hist_mean(h) / 1e6, thr, gflops, (long long)range_flops(p, m),
           (long long)vr_session_memory_bytes(s), cores, cores > 0 ? gflops / cores : 0);
  } else {
    printf("model %s  precision %s  threads %d  batch %d  runs %lld\n", p->model,
           vr_precision_name(p->prec), p->threads, p->batch, (long long)runs);
    printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  mean %.3f\n", p50, p90, p99,
           vr_hist_mean(h) / 1e6);
    printf("throughput %.2f samples/s  %.2f GFLOP/s  (%.3f GFLOP/sample)\n", thr, gflops,
           (double)range_flops(p, m) / 1e9);
    printf("session memory %.1f MiB  cpu %.2f cores busy on average (%.1f GFLOP per "
           "CPU-second)\n",
           (double)vr_session_memory_bytes(s) / 1048576.0, cores, cores > 0 ? gflops / cores : 0);
    if (p->nodes) print_nodes(p, m, s);
  }
  vr_free(h);
  return 0;
fail:
  fprintf(stderr, "vario perf: %s\n", err.msg);
  return 1;
}

typedef struct sess_job {
  perf_opts *p;
  const vr_model *m;
  const vr_session_opts *o;
  pthread_barrier_t *bar;
  vr_hist *h;
  int64_t runs;
  int rc;
  char msg[512];
} sess_job;

/* One of K concurrent sessions: create, warm up, wait for all, measure. */
static void *sess_worker(void *arg) {
  sess_job *j = arg;
  vr_errbuf err = {0};
  vr_session *s = NULL;
  vr_tensor in[64], out[64];
  void *bufs[64] = {0};
  j->rc = vr_session_create(j->m, j->o, &s, &err);
  if (!j->rc && make_inputs(s, j->p->batch, in, bufs)) j->rc = VR_ENOMEM;
  int nin = s ? vr_session_num_inputs(s) : 0;
  for (int i = 0; !j->rc && i < j->p->warmup; i++)
    j->rc = vr_session_run(s, j->p->batch, in, nin, out, 64, &err);
  pthread_barrier_wait(j->bar);
  int64_t dl = vr_now_ns() + (int64_t)(j->p->seconds * 1e9);
  while (!j->rc && (vr_now_ns() < dl || j->runs < 3)) {
    int64_t a = vr_now_ns();
    j->rc = vr_session_run(s, j->p->batch, in, nin, out, 64, &err);
    vr_hist_record(j->h, (uint64_t)(vr_now_ns() - a));
    j->runs++;
  }
  if (j->rc) snprintf(j->msg, sizeof j->msg, "%s", err.msg);
  for (int i = 0; i < 64; i++) vr_aligned_free(bufs[i]);
  vr_session_free(s);
  return NULL;
}

static int measure_multi(perf_opts *p, const vr_model *m, const vr_session_opts *o) {
  int k = p->sessions, rc = 0;
  sess_job *js = vr_calloc((size_t)k, sizeof(sess_job));
  pthread_t *ts = vr_calloc((size_t)k, sizeof(pthread_t));
  vr_hist *all = vr_malloc(sizeof(vr_hist));
  pthread_barrier_t bar;
  if (!js || !ts || !all) return 1;
  vr_hist_init(all);
  pthread_barrier_init(&bar, NULL, (unsigned)k + 1);
  for (int i = 0; i < k; i++) {
    js[i] = (sess_job){p, m, o, &bar, vr_malloc(sizeof(vr_hist)), 0, 0, ""};
    vr_hist_init(js[i].h);
    pthread_create(&ts[i], NULL, sess_worker, &js[i]);
  }
  pthread_barrier_wait(&bar);
  double c0 = cpu_seconds();
  int64_t t0 = vr_now_ns(), runs = 0;
  for (int i = 0; i < k; i++) pthread_join(ts[i], NULL);
  double wall = (double)(vr_now_ns() - t0) / 1e9;
  double cores = (cpu_seconds() - c0) / wall;
  for (int i = 0; i < k; i++) {
    if (js[i].rc && !rc) {
      fprintf(stderr, "vario perf: session %d: %s\n", i, js[i].msg);
      rc = 1;
    }
    vr_hist_merge(all, js[i].h);
    runs += js[i].runs;
    vr_free(js[i].h);
  }
  double thr = (double)runs * p->batch / wall;
  if (!rc)
    printf("{\"model\":\"%s\",\"precision\":\"%s\",\"sessions\":%d,\"threads\":%d,"
           "\"batch\":%d,\"runs\":%lld,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,"
           "\"throughput\":%.3f,\"gflops\":%.3f,\"cpu_cores\":%.2f}\n",
           p->model, vr_precision_name(p->prec), k, p->threads, p->batch, (long long)runs,
           vr_hist_quantile(all, 0.5) / 1e6, vr_hist_quantile(all, 0.9) / 1e6,
           vr_hist_quantile(all, 0.99) / 1e6, thr, thr * (double)range_flops(p, m) / 1e9, cores);
  pthread_barrier_destroy(&bar);
  vr_free(all);
  vr_free(js);
  vr_free(ts);
  return rc;
}

int vr_cmd_perf(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--blocks")) return vr__cmd_perf_blocks(argc, argv);
  perf_opts p;
  int rc = parse(argc, argv, &p);
  if (rc) return rc == 1 ? 0 : rc;
  vr_errbuf err = {0};
  vr_model *m = NULL;
  vr_session *s = NULL;
  vr_npy cal = {0};
  vr_tensor in[64], tcal;
  void *bufs[64] = {0};
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = p.threads;
  o.max_batch = p.batch;
  o.precision = p.prec;
  o.node_begin = p.rb;
  o.node_end = p.re;
  rc = 1;
  if (vr_model_load(p.model, &m, &err)) goto fail;
  if (vr_model_num_inputs(m) > 64) {
    fprintf(stderr, "vario perf: too many inputs\n");
    goto out;
  }
  if (p.cal) {
    if (vr_npy_read(p.cal, &cal, &err)) goto fail;
    tcal = (vr_tensor){vr_model_input(m, 0)->name, cal.dtype, cal.ndim, {0}, cal.data, cal.nbytes};
    memcpy(tcal.shape, cal.shape, sizeof(int64_t) * (size_t)cal.ndim);
    o.calibration = &tcal;
    o.n_calibration = 1;
  }
  if (p.sessions > 1) {
    rc = measure_multi(&p, m, &o);
    goto out;
  }
  if (vr_session_create(m, &o, &s, &err)) goto fail;
  if (make_inputs(s, p.batch, in, bufs)) {
    fprintf(stderr, "vario perf: out of memory\n");
    goto out;
  }
  rc = measure(&p, m, s, in);
  goto out;
fail:
  fprintf(stderr, "vario perf: %s\n", err.msg[0] ? err.msg : vr_strerror(err.code));
out:
  for (int i = 0; i < 64; i++) vr_aligned_free(bufs[i]);
  vr_npy_free(&cal);
  vr_session_free(s);
  vr_model_free(m);
  return rc;
}
