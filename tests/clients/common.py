"""What the client tests share: where the server is, the names of the test models, a tiny test
runner (no pytest), the tool-calling template and the few-shot chat that makes SmolLM2 call it.
"""
import json
import math
import os
import sys
import time
import traceback

URL = os.environ.get("PROMESERVE_URL", "http://127.0.0.1:11434")
GGUF = os.environ.get("PROMESERVE_TEST_GGUF", "")

MODEL = "smollm2:135m"             # the GGUF as is (the template comes from its metadata)
TOOLS_MODEL = "smollm2-tools:135m"  # the same weights with TOOLS_TEMPLATE below

# SmolLM2-135M's GGUF metadata (checked with gguf-py): what show/embed must report.
ARCH = "llama"
EMBEDDING_LENGTH = 576
CONTEXT_LENGTH = 8192
BLOCK_COUNT = 30

# A ChatML template with tool support in the Hermes / Qwen2.5 style (<tools> in the system
# turn, calls inside <tool_call></tool_call>), which is the format SmolLM2-Instruct was trained
# on for function calling. Written for this test (Go text/template, as Ollama model layers).
# Each tool is listed as its function object ({"name", "description", "parameters"}, as in
# SmolLM2's own tool prompts): with Qwen's {"type": "function", ...} wrapper the 135M model
# starts its calls with "type" instead of "name" under our engine's greedy decoding.
TOOLS_TEMPLATE = """{{- if .Messages }}
{{- if or .System .Tools }}<|im_start|>system
{{- if .System }}
{{ .System }}
{{- end }}
{{- if .Tools }}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{{- range .Tools }}
{{ json .Function }}
{{- end }}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
{{- end }}<|im_end|>
{{ end }}
{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
{{- if eq .Role "user" }}<|im_start|>user
{{ .Content }}<|im_end|>
{{ else if eq .Role "assistant" }}<|im_start|>assistant
{{ if .Content }}{{ .Content }}
{{- else if .ToolCalls }}<tool_call>
{{ range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ json .Function.Arguments }}}
{{ end }}</tool_call>
{{- end }}{{ if not $last }}<|im_end|>
{{ end }}
{{- else if eq .Role "tool" }}<|im_start|>user
<tool_response>
{{ .Content }}
</tool_response><|im_end|>
{{ end }}
{{- if and (ne .Role "assistant") $last }}<|im_start|>assistant
{{ end }}
{{- end }}
{{- else }}
{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ end }}{{ .Response }}{{ if .Response }}<|im_end|>{{ end }}"""
# Backslash-newline above only shortens the source line; the template has one line there.

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The name of the city"}},
            "required": ["city"],
        },
    },
}


def weather_history(style):
    """Three earlier turns in which the assistant answered a weather question with a tool call,
    then the question under test. Without them SmolLM2-135M answers from its own "knowledge";
    with them it calls get_weather(city="Paris") under greedy decoding, both in promeserve and
    in llama.cpp (llama-cpp-python 0.3.36 on the same rendered prompt; with two turns only
    llama.cpp does). style is "ollama" (arguments an object) or "openai" (arguments a JSON
    string, with ids)."""
    msgs = []
    for n, city in enumerate(("Berlin", "Madrid", "Rome")):
        msgs.append({"role": "user", "content": f"What is the weather in {city}?"})
        args = {"city": city}
        if style == "openai":
            call = {"id": f"call_{n}", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(args)}}
        else:
            call = {"function": {"name": "get_weather", "arguments": args}}
        msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
    msgs.append({"role": "user", "content": "What is the weather in Paris?"})
    return msgs


GREEDY = {"temperature": 0, "seed": 42}


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def check_schema_person(obj):
    """The JSON-schema tests ask for {"name": string, "age": integer}."""
    assert isinstance(obj, dict), f"not an object: {obj!r}"
    assert isinstance(obj.get("name"), str), f"name is not a string: {obj!r}"
    assert isinstance(obj.get("age"), int) and not isinstance(obj.get("age"), bool), \
        f"age is not an integer: {obj!r}"


PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def run_tests(tests):
    """Runs (name, function) pairs in order, prints one line each and a summary; exits 1 when
    any failed."""
    passed, failed = 0, []
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- any exception is a failed test
            failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3, file=sys.stdout)
        else:
            passed += 1
            print(f"ok   {name} ({time.time() - t0:.1f} s)")
        sys.stdout.flush()
    print(f"{passed} passed, {len(failed)} failed" + (": " + ", ".join(failed) if failed else ""))
    sys.exit(1 if failed else 0)
