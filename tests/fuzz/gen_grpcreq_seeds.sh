#!/bin/sh
# Re-creates the binary seeds of fuzz_grpcreq (seeds/grpcreq/*.bin) from
# their protobuf text form (seeds/grpcreq/*.txt) with Debian's protoc.
set -e
cd "$(dirname "$0")"
for t in seeds/grpcreq/*.txt; do
  protoc --encode=inference.ModelInferRequest -I ../../src/server/proto \
    grpc_service.proto < "$t" > "${t%.txt}.bin"
done
