/*
 * vario bench: Vario's perf_analyzer. An open-loop load generator against
 * a running `vario serve` (arrivals: constant, Poisson, Gamma with a CV,
 * Proteus trace files; closed loop with --arrival closed), or, with
 * --engine DIR, the same model run in-process without the server (the
 * reference for serving overhead and saturation throughput).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/npy.h"
#include "cli/commands.h"
#include "runtime/runtime.h"
#include "server/http.h"
#include "server/httpc.h"
#include "server/loadgen.h"
#include "sim/rng.h"

#include "cli/bench_args.h"

static void usage(FILE *f) {
  fprintf(f,
      "usage: vario bench --model M [options]        (against vario serve)\n"
      "       vario bench --app APP [--min-accuracy PCT] [options]  (model-less:\n"
      "                 POST /v2/apps/APP/infer, --slo-ms sent as latency_ms)\n"
      "       vario bench --pipeline P [--min-accuracy PCT] [options]  (the same\n"
      "                 parameters end to end to POST /v2/pipelines/P/infer)\n"
      "       vario bench --path /v2/health/live [options]   (GET only)\n"
      "       vario bench --engine DIR [--batch N] [--duration S]\n"
      "  --host ADDR --port N      server (default 127.0.0.1:8000)\n"
      "  --arrival KIND            constant | poisson | gamma | trace | closed\n"
      "                            (default poisson)\n"
      "  --rate QPS                mean request rate (constant/poisson/gamma)\n"
      "  --cv X                    gamma: coefficient of variation (default 1)\n"
      "  --trace FILE              arrival_ms,qos,deadline_ms[,acc] lines\n"
      "  --trace-speed X           replay the trace X times faster (default 1)\n"
      "  --duration S              seconds of arrivals (default 10)\n"
      "  --connections N           keep-alive connections (default 16)\n"
      "  --batch N                 rows per request (default 1)\n"
      "  --binary                  binary tensor extension (default JSON)\n"
      "  --slo-ms X                latency SLO per request (traces: the file's)\n"
      "  --send-timeout            send the SLO budget left at send time as \"timeout\"\n"
      "  --priority N              \"priority\" parameter\n"
      "  --input FILE.npy          sample rows (default: uniform random)\n"
      "  --payloads N              N different requests in turn, consecutive rows of\n"
      "                            --input (with --binary; default 1)\n"
      "  --csv FILE                per-second CSV\n"
      "  --json                    print the summary as JSON\n"
      "  --seed N                  arrival RNG seed (default 1)\n"
      "  --no-progress             no live status line (it is shown only when\n"
      "                            stderr is a terminal)\n");
}

static int parse_args(int argc, char **argv, bench_args *a) {
  vr_lg_opts_init(&a->lg);
  a->lg.port = 8000;
  a->lg.duration_s = 10;
  a->lg.progress_fd = isatty(2) ? 2 : -1;
  a->arrival = "poisson";
  a->rate = 100;
  a->cv = 1;
  a->trace_speed = 1;
  a->batch = 1;
  a->seed = 1;
  const char *k = NULL;
  for (int i = 1; i < argc; i++) {
    k = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) { usage(stdout); exit(0); }
    if (!strcmp(k, "--binary")) { a->lg.binary = 1; continue; }
    if (!strcmp(k, "--json")) { a->json = 1; continue; }
    if (!strcmp(k, "--send-timeout")) { a->lg.send_timeout = 1; continue; }
    if (!strcmp(k, "--no-progress")) { a->lg.progress_fd = -1; continue; }
    if (!v) goto bad;
    char *end = NULL;
    double x = strtod(v, &end);
    int num = end && *v && !*end;
    i++;
    if (!strcmp(k, "--model")) a->lg.model = v;
    else if (!strcmp(k, "--app")) a->lg.model = v, a->lg.app_mode = 1;
    else if (!strcmp(k, "--pipeline")) a->lg.model = v, a->lg.app_mode = VR_LG_PIPELINE;
    else if (!strcmp(k, "--min-accuracy") && num && x >= 0 && x <= 100) a->lg.min_accuracy = x;
    else if (!strcmp(k, "--path")) a->lg.path = v;
    else if (!strcmp(k, "--engine")) a->engine_dir = v;
    else if (!strcmp(k, "--host")) a->lg.host = v;
    else if (!strcmp(k, "--arrival")) a->arrival = v;
    else if (!strcmp(k, "--trace")) a->trace = v;
    else if (!strcmp(k, "--input")) a->input = v;
    else if (!strcmp(k, "--csv")) a->lg.csv_path = v;
    else if (!strcmp(k, "--port") && num && x >= 1 && x <= 65535) a->lg.port = (int)x;
    else if (!strcmp(k, "--rate") && num && x > 0 && x <= 1e7) a->rate = x;
    else if (!strcmp(k, "--cv") && num && x > 0 && x <= 100) a->cv = x;
    else if (!strcmp(k, "--trace-speed") && num && x > 0) a->trace_speed = x;
    else if (!strcmp(k, "--duration") && num && x > 0 && x <= 86400) a->lg.duration_s = x;
    else if (!strcmp(k, "--connections") && num && x >= 1 && x <= 4096) a->lg.connections = (int)x;
    else if (!strcmp(k, "--payloads") && num && x >= 1 && x <= 4096) a->lg.payloads = (int)x;
    else if (!strcmp(k, "--batch") && num && x >= 1 && x <= VR_RT_MAX_BATCH) a->batch = (int)x;
    else if (!strcmp(k, "--slo-ms") && num && x > 0) a->slo_ms = x;
    else if (!strcmp(k, "--priority") && num && x >= 0 && x <= 1000000 && x == (int)x)
      a->lg.priority = (int)x; /* the server takes 0..1e6 */
    else if (!strcmp(k, "--seed") && num && x >= 0) a->seed = (uint64_t)x;
    else goto bad;
  }
  if (!a->lg.model && !a->lg.path && !a->engine_dir) {
    fprintf(stderr, "vario bench: need --model, --app, --path or --engine\n");
    return 2;
  }
  return 0;
bad:
  fprintf(stderr, "vario bench: bad or incomplete option '%s'\n", k);
  usage(stderr);
  return 2;
}

/* Reads the model's first input from GET /v2/models/M. */
static int fetch_input(bench_args *a, vr_errbuf *err) {
  vr_httpc c;
  int rc = vr_httpc_open(&c, a->lg.host, a->lg.port, err);
  if (rc) return rc;
  char path[1024];
  int pn = snprintf(path, sizeof path, "/v2/%s/", vr_lg_target_kind(&a->lg));
  size_t pl = (size_t)pn;
  if (vr_http_pct_encode(path, sizeof path, &pl, a->lg.model, 0)) { /* one segment */
    vr_httpc_close(&c);
    return vr_errf(err, VR_EINVAL, "name too long");
  }
  vr_httpc_resp r;
  rc = vr_httpc_request(&c, "GET", path, NULL, NULL, 0, &r, err);
  json_t *root = NULL;
  if (!rc && r.head.status != 200)
    rc = vr_errf(err, VR_ENOENT, "GET %s: HTTP %d: %.*s", path, r.head.status,
                 (int)(r.body_len > 200 ? 200 : r.body_len), r.body);
  if (!rc && !(root = json_loadb(r.body, r.body_len, 0, NULL)))
    rc = vr_errf(err, VR_EFORMAT, "GET %s: not JSON", path);
  json_t *in = root ? json_array_get(json_object_get(root, "inputs"), 0) : NULL;
  if (!rc && (!in || json_array_size(json_object_get(root, "inputs")) != 1))
    rc = vr_errf(err, VR_EUNSUPPORTED, "bench drives single-input models");
  if (!rc) {
    static char name[VR_NAME_MAX];
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(in, "name")));
    a->lg.input_name = name;
    a->lg.dtype = vr_dtype_from_kserve(json_string_value(json_object_get(in, "datatype")));
    json_t *sh = json_object_get(in, "shape");
    a->lg.ndim = (int)json_array_size(sh);
    if (a->lg.ndim < 1 || a->lg.ndim > VR_MAX_DIMS || !vr_dtype_size(a->lg.dtype))
      rc = vr_errf(err, VR_EUNSUPPORTED, "input shape/datatype not usable");
    for (int d = 0; !rc && d < a->lg.ndim; d++) {
      a->lg.shape[d] = d ? json_integer_value(json_array_get(sh, d)) : a->batch;
      /* a dynamic dim past the batch (-1): bench cannot guess its size,
       * and multiplied into the payload size it asked for exabytes */
      if (a->lg.shape[d] < 1 || a->lg.shape[d] > (1 << 24))
        rc = vr_errf(err, VR_EUNSUPPORTED, "input '%s' dim %d is %lld: bench needs a fixed "
                     "size per sample", name, d, (long long)a->lg.shape[d]);
    }
  }
  json_decref(root);
  vr_httpc_close(&c);
  return rc;
}

/* Sample data: rows from --input (cycled), else uniform [0,1) floats. */
static void *make_data(bench_args *a, vr_errbuf *err) {
  size_t n = a->lg.payloads > 1 ? (size_t)a->lg.payloads : 1;
  for (int d = 0; d < a->lg.ndim; d++) n *= (size_t)a->lg.shape[d];
  size_t esz = vr_dtype_size(a->lg.dtype), bytes = n * esz;
  unsigned char *p = vr_malloc(bytes ? bytes : 1);
  if (!p) return NULL;
  if (a->input) {
    vr_npy npy;
    if (vr_npy_read(a->input, &npy, err)) { vr_free(p); return NULL; }
    if (npy.dtype != a->lg.dtype || npy.nbytes == 0) {
      vr_errf(err, VR_ETYPE, "%s: dtype differs from the model input", a->input);
      vr_npy_free(&npy);
      vr_free(p);
      return NULL;
    }
    for (size_t off = 0; off < bytes; off += npy.nbytes)
      memcpy(p + off, npy.data, bytes - off < npy.nbytes ? bytes - off : npy.nbytes);
    vr_npy_free(&npy);
  } else {
    vr_rng rng;
    vr_rng_seed(&rng, a->seed + 7);
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(vr_rng_next(&rng) >> 56);
    if (a->lg.dtype == VR_DT_F32)
      for (size_t i = 0; i < n; i++) ((float *)p)[i] = (float)vr_rng_unif(&rng);
  }
  return p;
}

static void print_result(const bench_args *a, const vr_lg_result *r) {
  if (a->json) {
    printf("{\"sent\":%llu,\"ok\":%llu,\"dropped\":%llu,\"rejected\":%llu,"
           "\"errors\":%llu,\"unfinished\":%llu,\"unsent\":%llu,\"elapsed_s\":%.3f,"
           "\"offered_qps\":%.1f,\"throughput_qps\":%.1f,\"p50_us\":%.1f,"
           "\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
           "\"mean_us\":%.1f,\"slo_attainment\":%.4f,\"early_drop_rate\":%.4f,"
           "\"compute_p50_us\":%.1f,\"overhead_p50_us\":%.1f,"
           "\"client_cpu_cores\":%.2f}\n",
           (unsigned long long)r->sent, (unsigned long long)r->ok,
           (unsigned long long)r->dropped, (unsigned long long)r->rejected,
           (unsigned long long)r->errors, (unsigned long long)r->unfinished,
           (unsigned long long)r->unsent, r->elapsed_s, r->offered_qps, r->throughput_qps, r->p50_us,
           r->p90_us, r->p99_us, r->p999_us, r->max_us, r->mean_us,
           r->slo_attainment, r->early_drop_rate, r->compute_p50_us,
           r->overhead_p50_us, r->client_cpu_cores);
    return;
  }
  printf("sent %llu  ok %llu  dropped(504) %llu  rejected(503) %llu  errors %llu"
         "  unfinished %llu  unsent %llu\n", (unsigned long long)r->sent,
         (unsigned long long)r->ok, (unsigned long long)r->dropped,
         (unsigned long long)r->rejected, (unsigned long long)r->errors,
         (unsigned long long)r->unfinished, (unsigned long long)r->unsent);
  printf("offered %.1f req/s  throughput %.1f req/s over %.2f s\n",
         r->offered_qps, r->throughput_qps, r->elapsed_s);
  printf("latency us: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n",
         r->p50_us, r->p90_us, r->p99_us, r->p999_us, r->max_us, r->mean_us);
  printf("SLO attainment %.4f  early-drop rate %.4f\n", r->slo_attainment,
         r->early_drop_rate);
  if (a->lg.model)
    printf("server compute p50 %.1f us  overhead p50 (latency - compute) %.1f us\n",
           r->compute_p50_us, r->overhead_p50_us);
  printf("load generator CPU %.2f cores\n", r->client_cpu_cores);
}

int vr_cmd_bench_engine(const char *dir, int batch, double duration, int json);

int vr_cmd_bench(int argc, char **argv) {
  bench_args a;
  memset(&a, 0, sizeof a);
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc;
  if (a.engine_dir)
    return vr_cmd_bench_engine(a.engine_dir, a.batch, a.lg.duration_s, a.json);
  vr_errbuf err = {0};
  void *data = NULL;
  vr_lg_arrival *arr = NULL;
  size_t n = 0;
  if (a.lg.model && (rc = fetch_input(&a, &err))) goto fail;
  if (a.lg.model && !(data = make_data(&a, &err))) { rc = -1; goto fail; }
  a.lg.data = data;
  if ((rc = vr_bench_arrivals(&a, &arr, &n, &err))) goto fail;
  a.lg.arrivals = arr;
  a.lg.n_arrivals = n;
  vr_lg_result res;
  if ((rc = vr_lg_run(&a.lg, &res, &err))) goto fail;
  print_result(&a, &res);
  /* The generator shares the machine with what it measures: a saturated
   * client inflates latencies and caps throughput, which would read as
   * the server's. */
  if (res.client_cpu_cores >= 0.9)
    fprintf(stderr, "vario bench: warning: the load generator used %.2f cores"
            " (one thread): results may be bound by the client\n",
            res.client_cpu_cores);
  vr_free(arr);
  vr_free(data);
  return 0;
fail:
  fprintf(stderr, "vario bench: %s\n", err.msg);
  vr_free(arr);
  vr_free(data);
  return 1;
}
