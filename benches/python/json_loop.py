"""The Python loop sluice is held against (issue 21): every line parsed,
re-serialised and written, with an fsync every 1,000 lines; nothing else.
Prints the CPU seconds it used and the lines it wrote.

    python3 benches/python/json_loop.py OUT INPUT...
"""
import json, os, resource, sys

out = open(sys.argv[1], "w")
n = 0
for path in sys.argv[2:]:
    with open(path) as f:
        for line in f:
            out.write(json.dumps(json.loads(line), separators=(",", ":")) + "\n")
            n += 1
            if n % 1000 == 0:
                out.flush()
                os.fsync(out.fileno())
out.flush()
os.fsync(out.fileno())
r = resource.getrusage(resource.RUSAGE_SELF)
print(r.ru_utime + r.ru_stime, n)
