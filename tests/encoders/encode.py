"""Encode records as a producer's serializer does, with the libraries
producers use: fastavro for Avro, Google's protobuf runtime for Protobuf.
The suite (tests/tests/schema_registry.rs) frames them with the registry's
id; this script writes only the encoded messages.

stdin, one JSON object:
  {"format": "avro", "schema": <Avro schema>, "records": [<record>, ...]}
  {"format": "json-schema", "schema": <JSON Schema>, "records": [...]}
  {"format": "protobuf", "schema": {"package": "shop", "message": "Click",
     "fields": [{"name": "event_id", "number": 1, "type": "string"}, ...]},
   "records": [...]}
A Protobuf field's type is a scalar (string, int64, int32, bool, double),
"timestamp" (google.protobuf.Timestamp, given in milliseconds) or
"message:<full name>" of a message an import defines (given as a dict).

Schema references: an Avro job may carry "references", the schemas (in
order) whose named types its schema uses; a Protobuf spec may carry
"imports", [{"file": "shop/money.proto", "package": ..., "message": ...,
"fields": [...]}], each another file its message's fields use. A
Protobuf answer then has "import_texts" too: each file's .proto text.

With "decode": true and "payloads" (hex) instead of "records", it reads
them back (fastavro, protobuf's json_format) and writes {"records": [...]}.

stdout, one JSON object: {"schema_text": <what to register>,
"payloads": [<hex of each encoded record>, ...]}; for Protobuf the schema
text is the .proto file the messages were built from.
"""

import io
import json
import sys


def avro(schema, records, references=()):
    import fastavro

    named = {}
    for r in references:
        fastavro.parse_schema(r, named_schemas=named)
    parsed = fastavro.parse_schema(schema, named_schemas=named)
    payloads = []
    for r in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, r)
        payloads.append(out.getvalue().hex())
    return json.dumps(schema), payloads


SCALARS = {"string": 9, "int64": 3, "int32": 5, "bool": 8, "double": 1}


def file_proto(name, spec, deps):
    """The FileDescriptorProto of one message `spec` in file `name`, and its
    .proto text; `deps` are the files it imports."""
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FileDescriptorProto(name=name, package=spec["package"], syntax="proto3")
    lines = ['syntax = "proto3";', f'package {spec["package"]};']
    for dep in deps:
        f.dependency.append(dep)
        lines.append(f'import "{dep}";')
    m = f.message_type.add(name=spec["message"])
    lines.append(f'message {spec["message"]} {{')
    for field in spec["fields"]:
        d = m.field.add(name=field["name"], number=field["number"], label=1)
        kind = field["type"]
        if kind == "timestamp":
            d.type = 11
            d.type_name = ".google.protobuf.Timestamp"
            lines.append(f'  google.protobuf.Timestamp {field["name"]} = {field["number"]};')
        elif kind.startswith("message:"):
            d.type = 11
            d.type_name = "." + kind[len("message:"):]
            lines.append(f'  {kind[len("message:"):]} {field["name"]} = {field["number"]};')
        else:
            d.type = SCALARS[kind]
            lines.append(f'  {kind} {field["name"]} = {field["number"]};')
    lines.append("}")
    return f, "\n".join(lines) + "\n"


def message_class(spec):
    """The message class `spec` describes, the .proto text of it, and the
    text of each file it imports (by its path)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    ts_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts_file)
    pool.Add(ts_file)
    imports = {}
    for imported in spec.get("imports", []):
        f, text = file_proto(imported["file"], imported, [])
        pool.Add(f)
        imports[imported["file"]] = text
    f, text = file_proto("schema.proto", spec, ["google/protobuf/timestamp.proto", *imports])
    pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(f'{spec["package"]}.{spec["message"]}'))
    return cls, text, imports


def protobuf(spec, records):
    cls, text, imports = message_class(spec)
    types = {field["name"]: field["type"] for field in spec["fields"]}
    payloads = []
    for r in records:
        msg = cls()
        for k, v in r.items():
            if types[k] == "timestamp":
                getattr(msg, k).FromMilliseconds(v)
            elif types[k].startswith("message:"):
                sub = getattr(msg, k)
                for kk, vv in v.items():
                    setattr(sub, kk, vv)
            else:
                setattr(msg, k, v)
        payloads.append(msg.SerializeToString().hex())
    return text, payloads, imports


def decode(job):
    """The records of `payloads` (hex, the message alone, without the
    registry's framing), as a consumer's deserializer reads them."""
    payloads = [bytes.fromhex(p) for p in job["payloads"]]
    if job["format"] == "avro":
        import fastavro

        parsed = fastavro.parse_schema(job["schema"])
        return [fastavro.schemaless_reader(io.BytesIO(p), parsed) for p in payloads]
    from google.protobuf import json_format

    cls, _, _ = message_class(job["schema"])
    out = []
    for p in payloads:
        msg = cls()
        msg.ParseFromString(p)
        out.append(json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True))
    return out


def json_schema(schema, records):
    # A JSON Schema serializer writes the record's JSON text as it is.
    return json.dumps(schema), [json.dumps(r).encode().hex() for r in records]


def main():
    job = json.load(sys.stdin)
    if job.get("decode"):
        json.dump({"records": decode(job)}, sys.stdout)
        return
    answer = {}
    if job["format"] == "avro":
        text, payloads = avro(job["schema"], job["records"], job.get("references", ()))
    elif job["format"] == "protobuf":
        text, payloads, answer["import_texts"] = protobuf(job["schema"], job["records"])
    else:
        text, payloads = json_schema(job["schema"], job["records"])
    answer.update(schema_text=text, payloads=payloads)
    json.dump(answer, sys.stdout)


main()
