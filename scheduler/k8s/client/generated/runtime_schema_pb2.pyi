# Generated from k8s.io/apimachinery@v0.36.4/pkg/runtime/schema/generated.proto
# (Copyright The Kubernetes Authors, Apache License 2.0) by hack/generate_protobuf.sh
# with libprotoc 35.1 (grpcio-tools). Do not edit.
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
