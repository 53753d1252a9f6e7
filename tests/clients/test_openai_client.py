"""The official `openai` Python client (unchanged) against promeserve's /v1 API.

    PROMESERVE_URL=http://127.0.0.1:PORT python test_openai_client.py [NAME-FILTER...]

Needs the models test_ollama_client.py --create made (smollm2:135m, smollm2-tools:135m).
Expected shapes follow OpenAI's API as Ollama's compatibility layer answers it (the reference
notes, §2): ids chatcmpl-/cmpl-, SSE chunks ending in [DONE], tool-call arguments as a JSON
string, errors {"error": {"message", "type", "param", "code"}}.
"""
import json
import os
import sys

import httpx
import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (EMBEDDING_LENGTH, MODEL, PERSON_SCHEMA, TOOLS_MODEL, URL,  # noqa: E402
                    WEATHER_TOOL, check_schema_person, cosine, norm, run_tests,
                    weather_history)

client = openai.OpenAI(base_url=URL + "/v1", api_key="x", max_retries=0, timeout=300)
GREEDY = {"temperature": 0, "seed": 42}
MSGS = [{"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Name three colours."}]


def test_models():
    ids = [m.id for m in client.models.list()]
    assert MODEL in ids and TOOLS_MODEL in ids, ids
    m = client.models.retrieve(MODEL)
    assert m.id == MODEL and m.object == "model", m
    assert m.owned_by == "library", m.owned_by
    assert isinstance(m.created, int) and m.created > 1_600_000_000, m.created
    try:
        client.models.retrieve("no-such-model:1")
    except openai.NotFoundError:
        pass
    else:
        raise AssertionError("retrieve of an unknown model succeeded")


def test_chat_stream_matches_non_stream():
    full = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=24, **GREEDY)
    assert full.id.startswith("chatcmpl-") and full.object == "chat.completion", full
    ch = full.choices[0]
    assert ch.index == 0 and ch.message.role == "assistant" and ch.message.content
    assert ch.finish_reason in ("stop", "length"), ch.finish_reason
    u = full.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert full.model == MODEL

    chunks = list(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=24,
                                                 stream=True, **GREEDY))
    assert len(chunks) >= 2
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ch.message.content, f"{text!r} != {ch.message.content!r}"
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and
               c.choices[0].finish_reason]
    assert reasons == [ch.finish_reason], reasons
    assert all(c.usage is None for c in chunks), "usage without stream_options"


def test_stream_include_usage():
    full = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=24, **GREEDY)
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MSGS, max_tokens=24, stream=True,
        stream_options={"include_usage": True}, **GREEDY))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None, last
    assert last.usage.completion_tokens == full.usage.completion_tokens
    assert last.usage.prompt_tokens > 0   # (a reused prompt prefix may count fewer)
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_max_tokens_and_stop():
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, **GREEDY)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5, r
    base = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=24, **GREEDY)
    text = base.choices[0].message.content
    words = [w for w in text.split() if w.isalpha() and len(w) >= 3]
    assert len(words) >= 2, text
    stop = words[len(words) // 2]
    cut = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=24, stop=stop,
                                         **GREEDY)
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[:text.index(stop)], (stop, cut)


def test_completions():
    prompt = "The three primary colours are"
    full = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, **GREEDY)
    assert full.id.startswith("cmpl-") and full.object == "text_completion", full
    c = full.choices[0]
    assert c.text and c.finish_reason in ("stop", "length") and c.index == 0
    assert full.usage.completion_tokens > 0
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=12,
                                            stream=True, **GREEDY))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == c.text, f"{text!r} != {c.text!r}"


def test_response_format():
    r = client.chat.completions.create(
        model=MODEL, max_tokens=200, response_format={"type": "json_object"},
        # "Describe a cat as a JSON object." makes greedy SmolLM2 repeat a key until max_tokens
        # under a JSON grammar in llama.cpp too (finish_reason "length"); with the keys named
        # llama.cpp and promeserve both close the object: {"name": "Felicia", "color": "red"}
        messages=[{"role": "user", "content": "Describe a cat as a JSON object with the keys "
                                              "name and color."}], **GREEDY)
    assert r.choices[0].finish_reason == "stop", r.choices[0]
    assert isinstance(json.loads(r.choices[0].message.content), dict), r.choices[0]
    r = client.chat.completions.create(
        model=MODEL, max_tokens=200,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "person", "schema": PERSON_SCHEMA}},
        messages=[{"role": "user", "content": "Alice is 30 years old. Describe her as JSON."}],
        **GREEDY)
    check_schema_person(json.loads(r.choices[0].message.content))


def test_tools():
    r = client.chat.completions.create(model=TOOLS_MODEL, messages=weather_history("openai"),
                                       tools=[WEATHER_TOOL], **GREEDY)
    ch = r.choices[0]
    calls = ch.message.tool_calls
    assert calls, f"no tool call; content {ch.message.content!r}"
    assert ch.finish_reason == "tool_calls", ch.finish_reason
    tc = calls[0]
    assert tc.type == "function" and tc.id, tc
    assert tc.function.name == "get_weather"
    assert isinstance(tc.function.arguments, str), type(tc.function.arguments)
    args = json.loads(tc.function.arguments)
    assert isinstance(args, dict) and args.get("city") == "Paris", args
    # streamed: the call's pieces put together give the same call
    chunks = list(client.chat.completions.create(model=TOOLS_MODEL, tools=[WEATHER_TOOL],
                                                 messages=weather_history("openai"),
                                                 stream=True, **GREEDY))
    name, arg_text = "", ""
    for c in chunks:
        if not c.choices:
            continue
        for d in c.choices[0].delta.tool_calls or []:
            if d.function is not None:
                name += d.function.name or ""
                arg_text += d.function.arguments or ""
    assert name == "get_weather" and json.loads(arg_text) == args, (name, arg_text)
    assert [c.choices[0].finish_reason for c in chunks if c.choices
            and c.choices[0].finish_reason] == ["tool_calls"]


def test_embeddings():
    inputs = ["The cat sat on the mat.", "Quantum chromodynamics describes quarks."]
    r = client.embeddings.create(model=MODEL, input=inputs)
    assert r.object == "list" and len(r.data) == 2, r
    assert [d.index for d in r.data] == [0, 1]
    for d in r.data:
        assert d.object == "embedding" and len(d.embedding) == EMBEDDING_LENGTH
        assert abs(norm(d.embedding) - 1) < 1e-3
    assert r.usage.prompt_tokens > 0
    one = client.embeddings.create(model=MODEL, input=inputs[0])
    assert len(one.data) == 1
    assert cosine(one.data[0].embedding, r.data[0].embedding) > 0.99999
    native = httpx.post(URL + "/api/embed", json={"model": MODEL, "input": inputs[0]},
                        timeout=300).json()["embeddings"][0]
    assert cosine(native, r.data[0].embedding) > 0.99999, "/v1/embeddings != /api/embed"


def expect_openai_error(cls, status, etype, fn, **kwargs):
    try:
        fn(**kwargs)
    except cls as e:
        assert e.status_code == status, e.status_code
        body = e.response.json()
        assert set(body) == {"error"}, body
        err = body["error"]
        assert isinstance(err.get("message"), str) and err["message"], err
        assert err.get("type") == etype, err
        assert "param" in err and "code" in err, err
        assert e.type == etype
        return e
    raise AssertionError(f"no {cls.__name__}")


def test_errors():
    e = expect_openai_error(openai.NotFoundError, 404, "not_found_error",
                            client.chat.completions.create, model="no-such-model:1",
                            messages=[{"role": "user", "content": "hi"}])
    assert "not found" in e.body["message"], e.body
    expect_openai_error(openai.NotFoundError, 404, "not_found_error",
                        client.embeddings.create, model="no-such-model:1", input="x")
    expect_openai_error(openai.NotFoundError, 404, "not_found_error",
                        client.completions.create, model="no-such-model:1", prompt="x")
    # a value of the wrong type is a bad request, not a crash or a 500
    expect_openai_error(openai.BadRequestError, 400, "invalid_request_error",
                        client.chat.completions.create, model=MODEL,
                        messages=[{"role": "user", "content": "hi"}],
                        temperature="hot")
    expect_openai_error(openai.BadRequestError, 400, "invalid_request_error",
                        client.chat.completions.create, model=MODEL, messages="hello")
    # streamed requests fail the same way before the stream starts
    expect_openai_error(openai.NotFoundError, 404, "not_found_error",
                        lambda **k: list(client.chat.completions.create(**k)),
                        model="no-such-model:1", stream=True,
                        messages=[{"role": "user", "content": "hi"}])
    r = httpx.post(URL + "/v1/chat/completions", content=b"{broken", timeout=60)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text


TESTS = [
    ("models list / retrieve", test_models),
    ("chat: stream == non-stream, usage", test_chat_stream_matches_non_stream),
    ("chat: stream_options.include_usage", test_stream_include_usage),
    ("chat: max_tokens, stop", test_max_tokens_and_stop),
    ("completions", test_completions),
    ("response_format json_object / json_schema", test_response_format),
    ("tools", test_tools),
    ("embeddings", test_embeddings),
    ("errors", test_errors),
]

if __name__ == "__main__":
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    run_tests([t for t in TESTS if not only or any(o in t[0] for o in only)])
