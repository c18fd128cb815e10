/*
 * ONNX protobuf -> engine IR, via protobuf-c code generated at build time
 * from Debian's onnx.proto.
 *
 * The parser validates everything it copies: dims, element counts against
 * raw_data / typed fields / external data lengths, names, node inputs that
 * are defined before use. Errors name the node, op, field or initializer.
 */
#ifndef VR_ENGINE_ONNX_H
#define VR_ENGINE_ONNX_H

#include <stddef.h>

#include "engine/ir.h"
#include "vario/status.h"

/* Parses a serialized ModelProto into g (initialised by the caller; on
 * failure g holds partial state that vr_graph_free releases). base_dir
 * (may be NULL = no external data allowed) resolves external data. */
int vr_onnx_parse_model(const void *buf, size_t len, const char *base_dir,
                        vr_graph *g, vr_errbuf *err);

/* Parses a serialized TensorProto (the conformance suite's input_N.pb /
 * output_N.pb). On success out->data is owned by the caller
 * (vr_aligned_free) and name (if non-NULL, VR_NAME_MAX bytes) receives the
 * tensor's name (may be empty). */
int vr_onnx_parse_tensor(const void *buf, size_t len, vr_tview *out,
                         char *name, vr_errbuf *err);

/* Reads a whole file into a vr_malloc'd buffer. */
int vr_onnx_read_file(const char *path, void **buf, size_t *len, vr_errbuf *err);

#endif
