/*
 * Model repository entries: <repo>/<model>/model.onnx + config.json.
 *
 * config.json (extra keys are ignored; the listed ones are validated
 * strictly, so a typo'd type or a negative batch is an error naming the
 * key rather than a silently different model):
 *   {"name": "fmnist_mlp", "app": "fashion", "task": "classification",
 *    "accuracy": 85.0,   (top-1, percent)
 *    "inputs":  [{"name": "input",  "datatype": "FP32", "shape": [-1,1,28,28]}],
 *    "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1,10]}],
 *    "max_batch_size": 64, "instances": 1, "threads": 1,
 *    "precision": "fp32", "max_queue_delay_us": 0,  (default 0)
 *    "calibration": "calibration.npy"}
 * Shapes must start with -1 (the batch dimension); the other dims are
 * positive. Plain struct: owns nothing outside itself.
 */
#ifndef VR_RUNTIME_CONFIG_H
#define VR_RUNTIME_CONFIG_H

#include <stdint.h>

#include "vario/engine.h"
#include "vario/status.h"

#define VR_RT_MAX_IO 8
#define VR_RT_MAX_BATCH 1024
#define VR_RT_MAX_INSTANCES 64
#define VR_RT_MAX_THREADS 256

typedef struct vr_model_config {
  char name[VR_NAME_MAX];
  char app[VR_NAME_MAX];
  char task[VR_NAME_MAX];
  double accuracy; /* percent; < 0 when not declared */
  int n_inputs, n_outputs;
  vr_tensor_info inputs[VR_RT_MAX_IO];
  vr_tensor_info outputs[VR_RT_MAX_IO];
  int max_batch_size;
  int instances;
  int threads;
  /* AsyFunc: pair_end > 0 loads every instance as a body whose nodes
   * [pair_begin, pair_end) a shadow may share (vr_rt_instance_opts). Not
   * read from a config file: a load request sets it (the repository
   * API's "pair_range" load parameter, docs/API.md). */
  int pair_begin, pair_end;
  vr_precision precision;
  int64_t max_queue_delay_us;
  char model_path[4096]; /* <dir>/model.onnx; empty for parsed text */
  /* "calibration": .npy of calibration rows for int8 sessions (relative
   * paths resolve against the model directory); empty when not given. */
  char calibration_path[4096];
  /* Triton repository facts (config.pbtxt or auto-complete from the ONNX
   * graph; runtime/pbtxt.h, vr_model_dir_load). Zero for config.json. */
  char platform[32];           /* "onnxruntime_onnx" */
  int has_dynamic_batching;
  int n_preferred_batch;
  int preferred_batch[8];      /* dynamic_batching.preferred_batch_size */
  char model_file[128];        /* default_model_filename; "" = model.onnx */
  /* output { label_filename } per output: a file name in the model
   * directory `dir` (runtime/labels.h reads it at load); "" = none. */
  char label_file[VR_RT_MAX_IO][128];
  char dir[4096];              /* the model directory (Triton layout) */
  int version;                 /* version directory served; 0 = flat */
  int n_versions;              /* version_policy specific: the versions */
  int versions[8];
  int autocompleted;           /* inputs/outputs read from the ONNX graph */
  /* Triton's queue policy ("queue_policy" in config.json), applied to
   * /v2/models/{m}/infer. Defaults shed: a request that cannot be served
   * within default_timeout_us of its arrival is answered 504 at once. */
  struct {
    int64_t max_queue_size;       /* queued requests per instance; 0 = no
                                     limit beyond the runtime's rows cap */
    int64_t default_timeout_us;   /* 0 = none; default 100000 */
    int delay;                    /* timeout_action: 0 REJECT, 1 DELAY */
    int allow_timeout_override;   /* a request's "timeout" wins; default 1 */
  } queue;
} vr_model_config;

/* The queue policy a model gets when its config states none (shedding:
 * 100 ms default timeout, REJECT, overrides allowed, no queue-size cap). */
void vr_model_config_queue_defaults(vr_model_config *c);

/* Parses config.json text. dir (may be NULL) fills model_path. */
int vr_model_config_parse(const char *text, size_t len, const char *dir,
                          vr_model_config *out, vr_errbuf *err);
/* Reads <dir>/config.json; checks that <dir>/model.onnx and the
 * calibration file (when given) exist. */
int vr_model_config_load(const char *dir, vr_model_config *out,
                         vr_errbuf *err);

/* Loads a model directory of a repository in any layout Vario reads:
 * Vario's (<dir>/config.json + model.onnx), Triton's (<dir>/config.pbtxt +
 * <dir>/<version>/model.onnx, the highest version unless version_policy
 * says otherwise), or a bare model.onnx (flat or versioned) with no config:
 * inputs, outputs and a dynamic batch are then completed from the ONNX
 * graph (max_batch_size 4, as Triton's auto-complete). */
int vr_model_dir_load(const char *dir, vr_model_config *out, vr_errbuf *err);
/* Whether dir looks like a model directory of any of those layouts. */
int vr_model_dir_is_model(const char *dir);

/* "fp32" / "bf16" / "int8" <-> enum without needing the engine. */
const char *vr_rt_precision_name(vr_precision p);
int vr_rt_precision_parse(const char *s, vr_precision *out);

/* The one spelling of a variant's name, used everywhere (API, metrics,
 * logs, the store, profile file names): "<model>-<prec>-t<threads>-b<max
 * batch>", e.g. "fmnist_mlp-fp32-t1-b64". Truncates to cap. */
void vr_rt_variant_name(char *out, size_t cap, const char *model,
                        vr_precision p, int threads, int max_batch);

/* Bytes of one sample (batch row) of a tensor described by info. */
int64_t vr_tensor_info_row_bytes(const vr_tensor_info *t);

#endif
