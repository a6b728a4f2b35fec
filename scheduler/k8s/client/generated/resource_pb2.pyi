# Generated from k8s.io/apimachinery@v0.36.4/pkg/api/resource/generated.proto
# (Copyright The Kubernetes Authors, Apache License 2.0) by hack/generate_protobuf.sh
# with libprotoc 35.1 (grpcio-tools). Do not edit.
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Quantity(_message.Message):
    __slots__ = ("string",)
    STRING_FIELD_NUMBER: _ClassVar[int]
    string: str
    def __init__(self, string: _Optional[str] = ...) -> None: ...

class QuantityValue(_message.Message):
    __slots__ = ("string",)
    STRING_FIELD_NUMBER: _ClassVar[int]
    string: str
    def __init__(self, string: _Optional[str] = ...) -> None: ...
