/*
 * Triton model configuration (`config.pbtxt`, protobuf text format) read
 * into a vr_model_config, strictly: a field Vario does not know is an
 * error naming it and its line, a field it knows but cannot honour
 * (sequence_batching, ensembles, GPU instance groups, a non-ONNX platform)
 * is an error saying so — never silently a different model.
 *
 * Read: name, platform ("onnxruntime_onnx") / backend ("onnxruntime"),
 * max_batch_size (>= 1), input/output { name, data_type, dims (without the
 * batch dimension) }, dynamic_batching { max_queue_delay_microseconds,
 * preferred_batch_size }, instance_group { count, kind: KIND_CPU|KIND_AUTO },
 * default_model_filename, version_policy { latest | all | specific },
 * output { label_filename } (classification labels, runtime/labels.h). Accepted and ignored (they tune
 * other engines): optimization, model_warmup, parameters, response_cache,
 * model_operations, runtime.
 *
 * Pure function of its input (fuzzed: tests/fuzz/fuzz_pbtxt.c). Paths in
 * the result are as written (relative); vr_model_dir_load resolves them.
 */
#ifndef VR_RUNTIME_PBTXT_H
#define VR_RUNTIME_PBTXT_H

#include <stddef.h>

#include "runtime/config.h"
#include "vario/status.h"

/* Fills out from config.pbtxt text. Inputs/outputs may be absent (the
 * loader completes them from the ONNX graph). */
int vr_pbtxt_parse(const char *text, size_t len, vr_model_config *out,
                   vr_errbuf *err);

#endif
