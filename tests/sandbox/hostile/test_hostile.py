"""Hostile programs: each asserts its verdict and, afterwards, that the host is untouched (no
process of the sandbox uids alive, no marker file on the host, and a correct verdict still comes
back from the same workers)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import socket
import stat
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hybridmetric.sandbox import (
    CRASH,
    FAILED,
    MEMORY,
    PASSED,
    SANDBOX_ERROR,
    SYNTAX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
    Sandbox,
    cgroup,
    isolation,
)

Run = Callable[..., RunResult]
Check = Callable[[Sandbox], None]
MARK = "hm_hostile_marker"  # the conftest's host check looks for files with this in their name

ESCAPE = f"""
import os, time
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
        open("/tmp/{MARK}_late", "w").write("escaped")
    os._exit(0)
os.waitpid(child, 0)
assert True
"""

#: For programs whose verdict is no timeout: they end of themselves, but may take seconds to (a
#: bomb that goes off late; one that fills its memory page by page, on a loaded machine).
SLOW = Limits(timeout_s=20.0, memory_mb=512)

#: A child of the program traces it (PTRACE_SEIZE): once the program ends, only the tracer can
#: reap it, so a harness that waits for it blocks until the tracer ends.
TRACED_BY_ITS_CHILD = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
if os.fork() == 0:
    libc.ptrace(0x4206, me, None, None)
    time.sleep(60)
    os._exit(0)
time.sleep(0.5)
assert 1 == 1
"""

#: As above, but the tracee is a thread: its zombie keeps the whole program from ending.
TRACED_THREAD = """
import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
ready, tid = threading.Event(), []
def sleeper():
    tid.append(threading.get_native_id())
    ready.set()
    time.sleep(100)
threading.Thread(target=sleeper, daemon=True).start()
ready.wait()
if os.fork() == 0:
    os.setsid()
    libc.ptrace(0x4206, tid[0], None, None)
    time.sleep(60)
    os._exit(0)
time.sleep(0.5)
assert True
"""

#: A trace function that raises in the harness's own frame, once the program's code is done.
RAISES_IN_THE_HARNESS = """
import sys
def tracer(frame, event, arg):
    if frame.f_code.co_name == "_python_main" and event == "line":
        raise KeyboardInterrupt
    return tracer
sys._getframe(1).f_trace = tracer
sys.settrace(tracer)
assert 1 == 1
"""

#: A profile function, or a trace function, that clears the failure the harness's frame holds
#: (a local, ``kind``) once the tests failed: before Python 3.13 the interpreter writes such a
#: function's changes to a frame's locals back into the frame; from 3.13 any code's.
_CLEARS_THE_FAILURE = """
import sys
def clear(frame, event, arg):
    if frame.f_code.co_name == "_python_main" and frame.f_locals.get("kind"):
        frame.f_locals["kind"] = b""
    return clear
%s
def check(candidate):
    assert candidate(1) == 2
check(lambda x: x)
"""
PROFILE_CLEARS_THE_FAILURE = _CLEARS_THE_FAILURE % "sys.setprofile(clear)"
TRACE_CLEARS_THE_FAILURE = _CLEARS_THE_FAILURE % (
    "sys._getframe(1).f_trace = clear\nsys.settrace(lambda *args: None)")
#: ... from a key of the program's namespace whose hash is ``__file__``'s: the harness's
#: ``namespace.pop("__file__")``, after it turned tracing off, calls its ``__eq__``, which turns
#: tracing on again for the harness's frame.
KEY_CLEARS_THE_FAILURE = _CLEARS_THE_FAILURE % """
class Key:
    def __hash__(self):
        return hash("__file__")
    def __eq__(self, other):
        sys._getframe(1).f_trace = clear
        sys.settrace(lambda *args: None)
        return False
del globals()["__file__"]
globals()[Key()] = 1"""
#: A forked child that makes itself the harness's own process (its pid in the harness's local
#: ``own_pid``: directly from 3.13, through a profile function before), so that its harness
#: sends the token, while the parent ends with status 0 before its tests.
FORKED_CHILD_CLAIMS_THE_TOKEN = """
import os, sys
def claim(frame, event, arg):
    if frame.f_code.co_name == "_python_main":
        frame.f_locals["own_pid"] = os.getpid()
if os.fork() == 0:
    sys._getframe(1).f_locals["own_pid"] = os.getpid()
    sys.setprofile(claim)
else:
    os.wait()
    os._exit(0)
    assert 1 == 2
"""

#: add_key(2) into the user keyring, which outlives the program's processes: the next program
#: of the same uid could read it. The sandbox refuses the call (EPERM).
KEYRING = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
added = libc.syscall(248, b"user", b"hm_hostile_key", b"left for the next program", 25, -4)
error = ctypes.get_errno()
if added > 0:  # the wall is down: leave nothing behind (KEYCTL_INVALIDATE), then fail
    libc.syscall(250, 21, ctypes.c_long(added), 0, 0, 0)
assert added < 0 and error == 1, (added, error)
"""

#: Shared memory, which RLIMIT_DATA does not count: an anonymous ``MAP_SHARED`` mapping
#: (``mmap.mmap(-1, n)``'s default), and System V segments detached once filled (no process maps
#: them, yet they hold their memory until removed).
SHARED_MAPPING = """
import mmap
m = mmap.mmap(-1, 3 << 30)
for i in range(0, 3 << 30, 4096):
    m[i] = 1
"""
DETACHED_SEGMENTS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for k in range(30):
    i = libc.shmget(0, 50 << 20, 0o1600)
    assert i >= 0, f"segment {k}: errno {ctypes.get_errno()}"
    p = libc.shmat(i, None, 0)
    ctypes.memset(p, 1, 50 << 20)
    libc.shmdt(ctypes.c_void_p(p))
"""

#: Programs that read fd 3, where the token waits until the harness takes it, and send what they
#: read on fd 4 as the harness would, then end with status 0 before their tests.
JS_SENDS_THE_TOKEN = """
const fs = require("fs");
const buffer = Buffer.alloc(64);
let size = 0;
try { size = fs.readSync(3, buffer, 0, 64, null); } catch (error) {}
fs.writeSync(4, "T");
fs.writeSync(4, buffer.subarray(0, size));
process.exit(0);
require("assert").ok(false);
"""
CPP_SENDS_THE_TOKEN = """#include <unistd.h>
static void send() {
  char token[64];
  long size = read(3, token, sizeof token);
  write(4, "T", 1);
  if (size > 0) write(4, token, size);
  _exit(0);
}
%s
"""
CPP_TESTS_IN_A_FORKED_CHILD = """#include <cassert>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((constructor)) static void split() {
  pid_t child = fork();
  if (child == 0) return;
  int status;
  waitpid(child, &status, 0);
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
int main() { assert(1 + 1 == 2); }
"""
#: A program that looks for its token where Python code can look: the locals of every frame
#: below its own (the harness's) and what the collector tracks; it sends every string of a
#: token's length it finds (16 or 32 bytes) as the harness would, and ends with status 0 before
#: its tests.
FINDS_THE_TOKEN = """
import gc, os, sys
found, frame = [], sys._getframe()
while frame is not None:
    found += list(frame.f_locals.values())
    frame = frame.f_back
for holder in gc.get_objects():
    if isinstance(holder, (tuple, list)):
        found += holder
    elif isinstance(holder, dict):
        found += holder.values()
sent = set()
for value in found:
    if isinstance(value, str):
        value = value.encode("utf-8", "replace")
    if isinstance(value, (bytes, bytearray)) and len(value) in (16, 32) and value not in sent:
        sent.add(bytes(value))
for value in list(sent)[:1000]:
    os.write(4, b"T" + value)
os._exit(0)
assert False
"""
#: A C++ program whose indirect function's resolver, which the dynamic loader runs while it
#: relocates the executable (before ``.preinit_array``), takes the token before the harness.
CPP_IFUNC_TAKES_THE_TOKEN = """#include <cassert>
#include <unistd.h>
static char token[64];
static long size;
static int helper_itself() { return 0; }
extern "C" void *resolve_helper() {
  size = read(3, token, sizeof token);
  return (void *)helper_itself;
}
extern "C" int helper() __attribute__((ifunc("resolve_helper")));
int main() {
  helper();
  write(4, "T", 1);
  write(4, token, size);
  _exit(0);
  assert(1 == 2);
}
"""
#: ... or its own ``__tunable_get_val``, which the C library calls in the dynamic loader's
#: place as it starts (before ``.preinit_array``): the executable's definition is found first.
CPP_LOADER_S_FUNCTION_TAKES_THE_TOKEN = """#include <cassert>
#include <unistd.h>
static char token[64];
static long size = -1;
extern "C" void __tunable_get_val(unsigned, void *, void *) {
  if (size < 0) size = read(3, token, sizeof token);
}
int main() {
  write(4, "T", 1);
  write(4, token, size / 2);
  _exit(0);
  assert(1 == 2);
}
"""
#: ... or a dynamic loader of its own choosing (the same, named by a path of its own), which
#: the sandbox does not trust to load it as the system's would.
CPP_NAMES_ITS_OWN_LOADER = """#include <cassert>
__attribute__((section(".interp"), used))
static const char loader[] = "/lib64/../lib64/ld-linux-x86-64.so.2";
int main() { assert(1 == 2); }
"""
#: ... or a relocation of its own (bytes in a section named like the linker's, which the
#: linker counts among its relocations) that rewrites the executable's DT_PREINIT_ARRAY, so
#: that the loader runs the program's array in place of the harness's (the addresses are this
#: machine's link of it: elsewhere the relocation misses, and the program fails or crashes).
CPP_RELOCATION_OF_ITS_OWN = """#include <cassert>
#include <csignal>
#include <cstring>
#include <vector>
#include <unistd.h>
#include <sys/syscall.h>
// A dynamic relocation of the program's own: a PROGBITS input section named .rela.data.rel.zz
// lands inside the executable's .rela.dyn (DT_RELA/DT_RELASZ). Its one entry, an
// R_X86_64_DTPOFF64 against symbol 0, writes a constant (its addend) over the d_ptr of the
// executable's DT_PREINIT_ARRAY entry in .dynamic, so that _dl_init runs the program's array
// instead of the harness's .preinit_array. The addresses are link-time constants (fixed point).
static char stolen[64];
static long stolen_n = -1;
extern "C" void steal(int, char **, char **) { stolen_n = syscall(SYS_read, 3, stolen, 64); }
extern "C" { __attribute__((used)) void (*const my_preinit[1])(int, char **, char **) = {steal}; }
asm(".section .rela.data.rel.zz,\\"a\\",@progbits\\n.balign 8\\n"
    ".quad 0x0000000000004df8\\n.quad 17\\n.quad 0x0000000000004d98\\n.text\\n");
static void on_abort(int) {
    if (stolen_n > 1) {
        char report[65] = {'T'};
        memcpy(report + 1, stolen, stolen_n / 2);
        syscall(SYS_write, 4, report, 1 + stolen_n / 2);
    }
    _exit(0);
}
static int installed = (signal(SIGABRT, on_abort), 0);
std::vector<int> sort_array(std::vector<int> v) { return v; }  // wrong: does not sort
int main() {
    auto candidate = sort_array;
    assert(candidate({3, 1, 2}) == (std::vector<int>{1, 2, 3}));
    assert(candidate({}) == (std::vector<int>{}));
}
"""
#: ... or one that makes the loader run what it makes of a constant in .preinit_array's first
#: slot (a TLS descriptor's function) and the program's own in the next, in a section of
#: relocations that the loader applies last, behind a decoy section of .preinit_array's type
#: (this machine's link of it, as above).
CPP_PREINIT_ARRAY_BEHIND_A_DECOY = """#include <bits/stdc++.h>
#include <unistd.h>
#include <csignal>
#include <cassert>
// An output section of type PREINIT_ARRAY ahead of the real .preinit_array (an input section
// that type named .exception_ranges*, which the default script places before it): the check
// looks only at the first such section, so the real one goes unchecked. Two relocations of the
// program's in .rela.plt (applied after all of .rela.dyn): TLSDESC on slot 0 (the loader writes
// its own _dl_tlsdesc_return there, and arg = addend - tls offset into slot 1), then JUMP_SLOT
// on slot 1 (lazy: += load address): take_token never runs, steal runs in slot 1.
static void f(int, char **, char **) {}
asm(".section .exception_ranges.zz,\\"aw\\",@preinit_array\\n .quad _ZL1fiPPcS0_\\n .previous\\n");
asm(".section .rela.plt,\\"a\\",@progbits\\n.balign 8\\n"
    ".quad 0x4d60\\n.quad 36\\n.quad 0x143e\\n"
    ".quad 0x4d68\\n.quad 7\\n.quad 0\\n.text\\n");
thread_local int tv = 1;
// (DT_RELASZ reaches over the first two entries of .rela.plt, which the loader then binds
// and shifts: make them functions nothing calls)
extern "C" void dummies() { getpgrp(); }
static char stolen[64];
static long stolen_n = -1;
static long raw(long n, long a, const void *b, long c) {
  long r; __asm__ volatile("syscall":"=a"(r):"a"(n),"D"(a),"S"(b),"d"(c):"rcx","r11","memory");
  return r;
}
extern "C" void steal(int, char **, char **) { stolen_n = raw(0, 3, stolen, sizeof stolen); }
static void on_abort(int) {
  if (stolen_n > 1) {
    char report[65] = {'T'};
    memcpy(report + 1, stolen, stolen_n / 2);
    raw(1, 4, report, 1 + stolen_n / 2);
  }
  _exit(0);
}
static int installed = (signal(SIGABRT, on_abort), 0);
std::vector<int> sort_array(std::vector<int> v) { return v; }  // wrong: does not sort
int main() {
  auto candidate = sort_array;
  assert(candidate({3, 1, 2}) == (std::vector<int>{1, 2, 3}));
  assert(candidate({}) == (std::vector<int>{}));
}
"""
#: A program that calls the harness's wrapper of ``main`` itself (the linker lets it name it):
#: the nested ``main`` returns 0 at once, and the program leaves before its tests.
CPP_CALLS_THE_WRAPPER = """#include <cassert>
#include <unistd.h>
extern "C" int __wrap_main(int, char **, char **);
int main(int argc, char **argv) {
  static int depth = 0;
  if (depth++) return 0;
  __wrap_main(argc, argv, nullptr);
  _exit(0);
  assert(1 == 2);
}
"""
#: A program in the harness's own package, whose ``class java`` (with ``io.FileInputStream``)
#: would stand for the ``java.io.FileInputStream`` the harness reads the token with.
JAVA_IN_THE_HARNESS_PACKAGE = """package hybridmetric_harness;
class java {
  static class io {
    static class FileInputStream implements AutoCloseable {
      FileInputStream(String path) {}
      int read(byte[] token) throws java.io.IOException { return Thief.steal(token); }
      public void close() {}
    }
  }
}
class Thief {
  static int steal(byte[] token) { System.exit(0); return 0; }
}
public class Main {
  public static void main(String[] args) { throw new AssertionError("the tests fail"); }
}
"""
#: The same through a spelling of the package that javac reads as the harness's (it leaves the
#: characters ``Character.isIdentifierIgnorable`` names out of identifiers), whose ``Class``
#: would stand for the one the harness finds the tests' ``main`` with.
JAVA_IN_THE_HARNESS_PACKAGE_SPELT_ANEW = """package hybridmetric_%sharness;
class Class {
  static java.lang.Class<?> forName(String name) throws Exception {
    return java.lang.Class.forName("hybridmetric_harness.Noop");
  }
}
class Noop { public static void main(String[] a) {} }
public class Problem {
  public static void main(String[] args) { throw new AssertionError("the tests fail"); }
}
"""
JAVA_SENDS_THE_TOKEN = """
import java.io.*;
public class Problem {
  public static void main(String[] args) throws Exception {
    byte[] token = new byte[64];
    int size = new FileInputStream("/proc/self/fd/3").read(token);
    FileOutputStream out = new FileOutputStream("/proc/self/fd/4");
    out.write('T');
    out.write(token, 0, Math.max(size, 0));
    out.flush();
    System.exit(0);
  }
}
"""
#: A failing program that walks the frames below its own to the report key its harness holds
#: as bytes, and sends ``S`` with it first, as the harness says that a program does not compile.
FORGES_A_SYNTAX_ERROR_WITH_THE_KEY = """import os, sys
def report_key():
    frame = sys._getframe()
    while frame is not None:
        key = frame.f_locals.get("key")
        if type(key) is bytes and len(key) == 16:
            return key
        frame = frame.f_back
    raise LookupError("no key")
os.write(4, b"S" + report_key())
def f(x):
    return x
assert f(1) == 2
"""
#: Programs that make their harness send a report that is not a pass (a child that fails; an
#: error with node's words for memory; an ``OutOfMemoryError`` out of ``main``), read it back
#: from their own report pipe (``/proc/self/fd/4`` opened for reading: the pipe is theirs) and
#: send what followed it as a pass: it is the report key, not the pass token.
READS_BACK_ITS_REPORT = """
import os
pipe = os.open("/proc/self/fd/4", os.O_RDONLY | os.O_NONBLOCK)
if os.fork() == 0:
    raise ValueError("a forked child fails: its harness sends nothing")
os.wait()
try:
    report = os.read(pipe, 64)
except BlockingIOError:
    report = b""
os.write(4, b"T" + report[1:])
os._exit(0)
assert 1 == 2
"""
#: node's beforeExit emitted on behalf of the process object (the scope of an async resource
#: given an AsyncResource's ids), below 20 of node's domain frames (bound functions leave none
#: of their own), from an immediate, with the tests still queued; then an exit before them.
JS_DEEP_FAKE_END = """const { AsyncResource } = require('async_hooks');
const domain = require('domain').create();
const resource = new AsyncResource('X');
for (const symbol of Object.getOwnPropertySymbols(resource)) process[symbol] = resource[symbol];
let end = require('events').prototype.emit.bind(process, 'beforeExit', 0);
for (let i = 0; i < 20; i++) end = domain.run.bind(domain, end);
setImmediate(() => {
  queueMicrotask(() => require('assert').strictEqual(1, 2));
  AsyncResource.prototype.runInAsyncScope.call(process, end);
  process.exit(0);
});
"""

#: ... the harness's own listener called through functions that vm compiled under node's file
#: names (node:events, then node:internal/async_hooks for as deep as a short window looks).
JS_NAMED_FAKE_END = """const vm = require('vm');
const { AsyncResource } = require('async_hooks');
const send = process.listeners('beforeExit')[0];
const emit = vm.runInThisContext('(function emit(f) { return f(); })', {filename: 'node:events'});
const hop = vm.runInThisContext('(function hop(f) { return f(); })',
                                {filename: 'node:internal/async_hooks'});
let end = emit.bind(null, send);
for (let i = 0; i < 16; i++) end = hop.bind(null, end);
const resource = new AsyncResource('X');
for (const symbol of Object.getOwnPropertySymbols(resource)) process[symbol] = resource[symbol];
setImmediate(() => {
  queueMicrotask(() => require('assert').strictEqual(1, 2));
  AsyncResource.prototype.runInAsyncScope.call(process, end);
  process.exit(0);
});
"""

#: The handler node gives a signal bound to the program's emission of beforeExit (node binds
#: process.emit as it is when it starts listening); its tests wait on the thread pool.
_SIGNAL_TO_BEFORE_EXIT = """const events = require('events');
const listen = process.listeners('newListener').find((f) => f.name === 'startListeningIfSignal');
const emit = process.emit;
process.emit = events.prototype.emit.bind(process, 'beforeExit');
listen('SIGUSR2');
process.emit = emit;
process.on('beforeExit', () => process.exit(0));
setImmediate(() => process.kill(process.pid, 'SIGUSR2'));
require('zlib').deflate(Buffer.alloc(5e7), () => require('assert').strictEqual(1, 2));
"""
JS_SIGNAL_FAKE_END = _SIGNAL_TO_BEFORE_EXIT + """const {HTTPParser} = require('_http_common');
const parser = new HTTPParser();
parser.initialize(HTTPParser.RESPONSE, {}, 0, 0);
const [resource] = Object.getOwnPropertySymbols(parser);
process.prependListener('beforeExit', () => {
  require('async_hooks').executionAsyncResource()[resource] = process;
});
"""
JS_SIGNAL_FAKE_END_WITH_IDS = _SIGNAL_TO_BEFORE_EXIT + """
const wrap = process.binding('async_wrap');
process.prependListener('beforeExit', () => {
  wrap.async_id_fields[wrap.constants.kExecutionAsyncId] = 0;
  wrap.async_id_fields[wrap.constants.kTriggerAsyncId] = 0;
  const top = wrap.async_hook_fields[wrap.constants.kStackLength] - 1;
  wrap.execution_async_resources[top] = process;
});
"""

#: A JavaScript candidate whose handle (a pipe server's) is given the process object's
#: asynchronous context (ids 0) through its asyncReset, so that node calls the handle's close
#: callback, an emission of beforeExit, as it calls its own, while its (failing) tests wait on
#: work of node's thread pool.
JS_HANDLE_IN_NODE_S_CONTEXT = """function add(x, y) { return x - y; }
{
  const handle = require('net').createServer().listen('socket')._handle;
  process.on('beforeExit', () => process.exit(0));
  Promise.resolve().then(() => {
    handle.asyncReset(process, 0);
    handle.close(process.emit.bind(process, 'beforeExit', 0));
  });
}
const assert = require('node:assert');
require('zlib').deflate(Buffer.alloc(5e7), () => assert.deepEqual(add(1, 2), 3));
"""
#: ... that replaces vm's native runInContext, through which the harness reads the frames under
#: a beforeExit, so that its own emission, from a promise's reaction between two immediates
#: (node's context, ids 0), reads as node's
JS_REPLACES_THE_FRAME_READER = """function f(x) {
  return new Promise((resolve) => {
    const native = Object.getPrototypeOf(require('vm').Script.prototype);
    native.runInContext = () => () => ['node:events'];
    setImmediate(() => {
      setImmediate(() => {
        Promise.resolve().then(() => {
          resolve(x + 100);
          process.emit('beforeExit', 0);
          process.exit(0);
        });
      });
      setImmediate(() => {}).unref();
    });
  });
}
const assert = require('node:assert');
async function test() { assert.deepEqual(await f(1), 2); }
test();
"""
#: ... that drops the report of its failure after the token, through node's fs binding, whose
#: writeString fs.writeSync looks up at each call
JS_DROPS_ITS_REPORT = """const fsBinding = process.binding('fs');
const writeString = fsBinding.writeString;
let after = 0;
fsBinding.writeString = function (fd, text, ...rest) {
  if (fd === 4 && after === 2) return text.length;
  if (fd === 4 && (after === 1 || text === 'T')) after++;
  return Reflect.apply(writeString, this, [fd, text, ...rest]);
};
process.on('exit', () => { process.exitCode = 0; });
process.once('beforeExit', () => require('assert').strictEqual(1, 2));
"""

#: ... whose getter of errno on Object.prototype, which fs.writeSync reads after each write of
#: the harness's, throws once the token went out: between the two writes of a report of its
#: failure, the kind and the key, before they went out in one
JS_THROWS_BETWEEN_A_REPORT_S_WRITES = """function add(x, y) { return x - y; }
process.on('uncaughtException', () => {});
process.on('beforeExit', () => {
  Object.defineProperty(Object.prototype, 'errno', { configurable: true, get() { throw 0; } });
});
process.once('beforeExit', () => require('assert').deepEqual(add(1, 2), 3));
"""
#: ... that emits beforeExit from a promise's reaction with no frame of its own below (the last
#: immediate's), the promise's async ids 0 (through its own symbols, which node's promise hook
#: reads) and its resource_symbol the process object (what executionAsyncResource shows)
JS_PROMISE_PASSES_FOR_THE_PROCESS = """function f(x) {
  return new Promise(() => {
    const { createHook, AsyncResource } = require('async_hooks');
    const named = (object, name) =>
      Object.getOwnPropertySymbols(object).find((s) => s.description === name);
    const resource = new AsyncResource('x');
    const idOf = named(resource, 'async_id_symbol');
    const triggerOf = named(resource, 'trigger_async_id_symbol');
    const handle = require('zlib').createDeflate()._handle;
    handle.asyncReset({});
    const publicOf = named(handle, 'resource_symbol');
    createHook({ before() {} }).enable();
    setImmediate(() => {
      const emission = Promise.resolve(0).then(process.emit.bind(process, 'beforeExit'));
      let reads = 0;
      Object.defineProperty(emission, idOf, { get: () => (reads++ % 2 === 0 ? 1 : 0), set() {} });
      emission[triggerOf] = 0;
      emission[publicOf] = process;
      emission.then(() => process.exit(0));
    });
  });
}
const assert = require('node:assert');
async function test() { assert.deepEqual(await f(1), 2); }
test();
"""

#: What follows a candidate's ``leak``, which leaves an asynchronous context of its own open
#: above node's (process, ids 0) while node runs its timers: a promise's reaction then emits
#: beforeExit in node's context while the (failing) tests wait on the thread pool (for which
#: node counts no resource).
_LEFT_OPEN_THEN_A_FAKE_END = """setImmediate(() => {
  setTimeout(() => { Promise.resolve().then(leak); }, 1);
  setTimeout(() => {
    process.on("beforeExit", () => process.exit(0));
    Promise.resolve(0).then(process.emit.bind(process, "beforeExit"));
  }, 1);
});
const assert = require("assert");
require("crypto").pbkdf2("a", "b", 1000000, 8, "sha1", () => {
  assert.strictEqual(add(1, 2), 3);
});
"""
#: ... whose pop of node's array of resources throws (Array.prototype.pop): node's own pop
#: then removes the program's context
JS_LEAVES_A_CONTEXT_OPEN = """const { AsyncResource } = require("async_hooks");
function add(a, b) { return a + b + 1; }
function leak() {
  const pop = Array.prototype.pop;
  Array.prototype.pop = function () { Array.prototype.pop = pop; throw new Error("leak"); };
  try { new AsyncResource("x").runInAsyncScope(() => {}); } catch (_) {}
  Array.prototype.pop = pop;
}
""" + _LEFT_OPEN_THEN_A_FAKE_END
#: ... the same, its context left open by an after hook that overflows the stack
JS_OVERFLOWS_OUT_OF_A_CONTEXT = """const ah = require("async_hooks");
function add(a, b) { return a + b + 1; }
function leak() {
  const res = new ah.AsyncResource("x");
  for (const s of Object.getOwnPropertySymbols(res)) res[s] = 0;
  const hook = ah.createHook({ after() {} });
  let leaked = false;
  const tail = () => {
    hook.enable();
    try { res.runInAsyncScope(() => {}); } catch (_) {}
    hook.disable();
    if (ah.executionAsyncResource() === res) leaked = true;
  };
  const pads = [];
  for (let k = 0; k < 64; k++) pads.push(new Array(k).fill(0));
  const at = (k) => { try { at(k); } catch (_) {} if (!leaked) tail.apply(null, pads[k]); };
  for (let k = 0; k < 64 && !leaked; k++) { try { at(k); } catch (_) {} }
}
""" + _LEFT_OPEN_THEN_A_FAKE_END
#: ... that closes the report pipe after the token, so that the report of its failure then
#: cannot go out, and sets its exit status back to 0
JS_CLOSES_ITS_REPORT_PIPE = """const fs = require("fs");
function add(a, b) { return a + b + 1; }
let once = false;
process.on("beforeExit", () => {
  if (once) return;
  once = true;
  fs.closeSync(4);
  process.on("exit", () => { process.exitCode = 0; });
  require("assert").strictEqual(add(1, 2), 3);
});
"""

#: ... that makes process.domain's enter an emission of beforeExit, which the domain module's
#: callback for node's own calls (async hooks on) calls in node's context, while its (failing)
#: tests wait on the thread pool
JS_ENTERS_A_DOMAIN_OF_ITS_OWN = """function add(a, b) { return a - b; }
require('async_hooks').createHook({ before() {} }).enable();
require('domain');
let armed = true;
process.on('beforeExit', () => { if (armed) { armed = false; process.exit(0); } });
let ticks = 0;
setInterval(() => {
  if (++ticks !== 3) return;
  process.domain = { enter: process.emit.bind(process, 'beforeExit', 0), exit() {} };
  setImmediate(() => {}).unref();
}, 2).unref();
const assert = require('assert');
require('crypto').pbkdf2('pw', 'salt', 3000000, 32, 'sha256', () => {
  assert.strictEqual(add(1, 2), 3);
});
"""
#: ... an ES module that waits at its top level for node's own beforeExit, then starts its
#: (failing) tests and exits before they end
JS_MODULE_STARTS_ITS_TESTS_AT_THE_END = """import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
await new Promise((resolve) => process.once('beforeExit', resolve));
setImmediate(() => process.exit(0));
function add(a, b) { return a - b; }
const assert = require('node:assert');
setTimeout(() => { assert.strictEqual(add(1, 2), 3); }, 50);
"""

#: ... that makes process.emit a Proxy of node's, called through a bound function (no frame of
#: its own), which turns every event into node's exit once node's own beforeExit came: the
#: error of its (failing) test, emitted for the harness to hear, then reads as node's end
JS_PROXIES_PROCESS_EMIT = """const assert = require("assert"), emit = process.emit;
let once = false;
process.on("beforeExit", () => {
  if (once) return;
  once = true;
  process.emit = new Proxy(emit, { apply: Reflect.apply.bind(null, emit, process, ["exit", 0]) });
  setTimeout(() => assert.strictEqual(1, 2), 10);
});
"""

#: ... that hides its (failing) test's error from the monitor the harness once listened with
#: (its entry in process._events taken out, then put back where its own handler swallows
#: the error); the harness hears of it through node's process._fatalException
JS_HIDES_ITS_ERROR_FROM_THE_MONITOR = """const ev = process._events;
const m = ev.uncaughtExceptionMonitor;
ev.uncaughtExceptionMonitor = undefined;
process.on('uncaughtException', () => { ev.uncaughtExceptionMonitor = m; });
function f(x) { return x; }
require('assert').strictEqual(f(1), 2);
"""

JS_ANOTHER_PROCESS = """const assert = require('assert');
const real = process;
const [monitor] = real.listeners('uncaughtExceptionMonitor');
real.removeListener('uncaughtExceptionMonitor', monitor);
real.on('uncaughtException', () => {});
const stand_in = new (require('events'))();
stand_in.on('uncaughtExceptionMonitor', monitor);
globalThis.process = new Proxy(real, {
  get: (target, key) => key === '_events' ? stand_in._events : Reflect.get(target, key),
});
setTimeout(() => assert.strictEqual(1, 2), 5);
"""

#: A JavaScript candidate that runs a callback in the process object's asynchronous scope (ids
#: 0, under an AsyncResource's symbols set on process) and overflows the stack in a hook before
#: the scope is left, so that later callbacks run as node's own beforeExit does; then it emits
#: beforeExit from a promise's reaction and exits before the awaited tests fail.
JS_ENTERS_NODE_S_OWN_CONTEXT = """const ah = require('async_hooks');
function leak() {
  const [id, trigger] = Object.getOwnPropertySymbols(new ah.AsyncResource('X'));
  const run = ah.AsyncResource.prototype.runInAsyncScope;
  const hook = ah.createHook({ before() {} }).enable();
  process[id] = 0; process[trigger] = 0;
  let leaked = false;
  function deeper(n) {
    try { deeper(n + 1); } catch (e) {}
    if (leaked) return;
    try { run.call(process, () => {}); } catch (e) {}
    if (ah.executionAsyncResource() === process) leaked = true;
  }
  for (let i = 0; i < 20 && !leaked; i++) deeper(0);
  hook.disable();
}
function add(x, y) {
  return new Promise((resolve) => {
    Promise.resolve().then(leak);
    setImmediate(() => {
      Promise.resolve(0).then(process.emit.bind(process, 'beforeExit'))
        .then(() => process.reallyExit(0)).then(() => resolve(x - y));
    });
  });
}
const assert = require('node:assert');
async function test() { assert.deepEqual(await add(1, 2), 3); }
test();
"""
#: A JavaScript candidate that emits beforeExit from a promise's reaction between two due timers
#: (whose context is node's own), having given the harness's frame reader a fake Error through
#: Object.prototype, which a context's global once found.
JS_FAKES_THE_FRAMES_THROUGH_OBJECT_PROTOTYPE = """function f(x) {
  const Fake = function () {};
  Fake.captureStackTrace = (holder) => { holder.stack = [{ getFileName: () => "node:events" }]; };
  Object.prototype.Error = Fake;
  setTimeout(() => {
    Promise.resolve().then(() => {
      process.emit("beforeExit", 0);
      delete Object.prototype.Error;
      process.exit(0);
    });
  }, 5);
  return new Promise((resolve) => setTimeout(() => resolve(-1), 5).unref());
}
const assert = require('node:assert');
async function test() { assert.deepEqual(await f(1), 2); }
test();
"""
#: An ES module whose top-level await never settles, before its tests, and whose getter of
#: Promise.prototype.constructor had node's own awaits adopt promises through its own `then`,
#: which settled the harness's import of it early.
JS_SETTLES_ITS_IMPORT_EARLY = """let armed = false;
const originalThen = Promise.prototype.then;
Object.defineProperty(Promise.prototype, "constructor", {
  configurable: true, get() { return armed ? Object : Promise; } });
Promise.prototype.then = function (onFulfilled, onRejected) {
  if (armed && typeof onFulfilled === "function") {
    let done = false;
    originalThen.call(this, (v) => { if (!done) { done = true; onFulfilled(v); } },
                      (e) => { if (!done) { done = true; onRejected(e); } });
    setImmediate(() => { if (!done) { done = true; onFulfilled(undefined); } });
    return;
  }
  return originalThen.call(this, onFulfilled, onRejected);
};
process.prependListener("beforeExit", () => { armed = true; });
process.exitCode = 0;
await new Promise(() => {});
const assert = require('node:assert');
assert.deepEqual(1, 2);
"""
JS_READS_BACK_ITS_REPORT = """
const fs = require("fs");
process.on("uncaughtException", () => {
  const pipe = fs.openSync("/proc/self/fd/4", "r");
  const report = Buffer.alloc(64);
  const size = fs.readSync(pipe, report, 0, 64, null);
  fs.writeSync(4, "T");
  fs.writeSync(4, report.subarray(1, size));
  process.exit(0);
});
try { require("assert").strictEqual(1 + 1, 3); }
catch (error) { throw new RangeError("Array buffer allocation failed"); }
"""
#: A Java program that loads an agent of its own into its JVM, in process (the DiagnosticCommand
#: MBean's ``jvmtiAgentLoad``), opens ``java.lang`` to itself through it, reads the harness
#: frame's locals (``LiveStackFrame``) and sends the pass it finds there before its tests fail
#: (red-team round 7).
JAVA_LOADS_AN_AGENT = """
import java.io.*;
import java.lang.reflect.*;
import java.util.*;
class Problem {
  static volatile java.lang.instrument.Instrumentation inst;
  public static void agentmain(String a, java.lang.instrument.Instrumentation i) { inst = i; }
  static void forge() throws Throwable {
    File jar = new File("/tmp/agent.jar");
    java.util.jar.Manifest m = new java.util.jar.Manifest();
    m.getMainAttributes().put(java.util.jar.Attributes.Name.MANIFEST_VERSION, "1.0");
    m.getMainAttributes().putValue("Agent-Class", "Problem");
    new java.util.jar.JarOutputStream(new FileOutputStream(jar), m).close();
    java.lang.management.ManagementFactory.getPlatformMBeanServer().invoke(
        new javax.management.ObjectName("com.sun.management:type=DiagnosticCommand"),
        "jvmtiAgentLoad", new Object[] {new String[] {jar.getPath()}},
        new String[] {String[].class.getName()});
    if (inst == null) throw new Error("no agent");
    inst.redefineModule(Object.class.getModule(), Set.of(), Map.of(),
        Map.of("java.lang", Set.of(Problem.class.getModule())), Set.of(), Map.of());
    Class<?> live = Class.forName("java.lang.LiveStackFrame");
    Method walker = live.getMethod("getStackWalker", Set.class);
    walker.setAccessible(true);
    Method locals = live.getMethod("getLocals");
    locals.setAccessible(true);
    List<Object[]> found = new ArrayList<>();
    ((StackWalker) walker.invoke(null, EnumSet.of(StackWalker.Option.RETAIN_CLASS_REFERENCE)))
        .forEach(f -> {
          try {
            found.add((Object[]) locals.invoke(f));
          } catch (Exception e) {
            throw new RuntimeException(e);
          }
        });
    for (Object[] frame : found) for (Object o : frame) {
      if (o instanceof byte[] b && b.length > 1 && b.length < 64 && b[0] == 'T') {
        try (FileOutputStream out = new FileOutputStream("/proc/self/fd/4")) { out.write(b); }
        Runtime.getRuntime().halt(0);
      }
    }
  }
  static long add(long x, long y) { return x - y; }
  public static void main(String[] args) {
    try {
      forge();
    } catch (Throwable t) {
      t.printStackTrace();
    }
    assert add(2, 3) == 5;
  }
}
"""


#: A C++ program whose relocation of its own (``inj``: an Elf64_Rela, R_X86_64_DTPOFF64 against
#: ``__libc_start_main``, which writes the symbol's value plus the addend) rewrites the addend of
#: the linker's own relocation of ``.preinit_array``'s first slot, so that the loader calls
#: ``steal`` there in place of the harness's ``take_token``: a writable section named like the
#: linker's relocations (``.rela.data.*``, or one named ``.dynstr``) made the linker's first
#: segment writable (red-team round 7; its constants fit this machine's link of it).
CPP_REWRITES_THE_LOADER_S_TABLES = """
#include <bits/stdc++.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
static char stolen[64];
static long nstolen;
extern "C" __attribute__((used, noinline)) void steal(int, char **, char **) {
  nstolen = syscall(SYS_read, 3, stolen, sizeof stolen);
}
static void on_abort(int) {
  if (nstolen >= 32) {
    char out[17];
    out[0] = 'T';
    memcpy(out + 1, stolen, 16);
    syscall(SYS_write, 4, out, 17);
  }
  _exit(0);
}
static int installed = (signal(SIGABRT, on_abort), 0);
__attribute__((section(".rela.data.zz"), used, aligned(8)))
%s unsigned long inj[3] = {%s, (6UL << 32) | 17, 0xfffffffffffda15cUL};
%s
std::vector<long> sort_array(std::vector<long> arr) { return arr; }
int main() {
  auto candidate = sort_array;
  assert(candidate(std::vector<long>({3, 1, 2})) == std::vector<long>({1, 2, 3}));
}
"""


#: A C++ program that defines ``__tunable_get_val`` (which the C library calls as it starts,
#: before ``.preinit_array``), reading fd 3 there, and adds a copy relocation of its own against
#: it, which the check of names the loader defines once excused (red-team round 8).
CPP_COPIES_THE_LOADER_S_FUNCTION = """
#include <bits/stdc++.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
static char stolen[64];
static long stolen_n = -1;
extern "C" void __tunable_get_val(unsigned, void *, void *) {
  if (stolen_n < 0) stolen_n = syscall(SYS_read, 3, stolen, sizeof stolen);
}
extern "C" __attribute__((used, aligned(64))) char sink[8192];
char sink[8192];
static void on_abort(int) {
  if (stolen_n > 1) {
    char report[65] = {'T'};
    memcpy(report + 1, stolen, stolen_n / 2);
    syscall(SYS_write, 4, report, 1 + stolen_n / 2);
  }
  _exit(0);
}
static int installed = (signal(SIGABRT, on_abort), 0);
__attribute__((section(".rela.data.zz"), used, aligned(8)))
const unsigned long inj[3] = {0x5140UL, (23UL << 32) | 5, 0};
std::vector<int> sort_array(std::vector<int> v) { return v; }
int main() {
  auto candidate = sort_array;
  assert(candidate({3, 1, 2}) == (std::vector<int>{1, 2, 3}));
}
"""


JAVA_READS_BACK_ITS_REPORT = """
import java.io.*;
class Problem {
  public static void main(String[] args) {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        byte[] report = new byte[64];
        int size = new FileInputStream("/proc/self/fd/4").read(report);  // R, M, the key
        FileOutputStream out = new FileOutputStream("/proc/self/fd/4");
        out.write('T');
        out.write(report, 2, size - 2);
        out.flush();
      } catch (IOException e) {}
      Runtime.getRuntime().halt(0);
    }));
    try { assert 1 + 1 == 3; } catch (AssertionError e) { throw new OutOfMemoryError("fake"); }
  }
}
"""


def _or_pattern_bomb(names: int = 400, alternatives: int = 10) -> str:
    """A ``match`` whose or-pattern binds ``names`` names in ``alternatives`` orders: code that
    takes the compiler time that grows with the cube of the names (28 s here, from 19 KiB)."""
    order = [f"a{i}" for i in range(names)]
    patterns = ["[" + ",".join(order[i::alternatives] + order[:i] + [
        n for j, n in enumerate(order[i:]) if j % alternatives]) + "]"
        for i in range(alternatives)]
    return "match 1:\n case " + "|".join(patterns) + ":\n  pass\nassert 1 == 2\n"


#: The bomb with each word ``case`` in UTF-7 (``+AGMAYQBzAGU-``), which the file's coding
#: declaration makes the compiler read as ``case``.
UTF7_OR_PATTERN_BOMB = "# coding: utf-7\n" + _or_pattern_bomb().replace(
    "case", "+AGMAYQBzAGU-")

# (id, language, source, allowed outcomes[, limits])
#: What a worker thread of a JavaScript program below runs where it runs without the harness:
#: it ends what the main thread runs (a microtask, and with it the queue: the tests'
#: continuation) through the inspector.
JS_EVIL = ("\n    const session = new (require('inspector').Session)();\n"
           "    session.connectToMainThread();\n"
           "    session.post('Runtime.terminateExecution', () => session.disconnect());\n  ")


def js_worker_attack(setup: str, options: str = "") -> str:
    """A JavaScript program whose test fails: after ``setup``, it queues a microtask that spins
    for 3 s, starts a worker thread (eval, with ``options`` more), then runs its test."""
    return ("function add(a, b) { return a + b; }\n{\n" + setup
            + "  Promise.resolve().then(() => {\n    const end = Date.now() + 3000;\n"
            "    while (Date.now() < end) {}\n  });\n"
            f"  new (require('worker_threads').Worker)('', {{ eval: true{options} }});\n}}\n"
            "const assert = require('node:assert');\n"
            "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n")


HOSTILE: list[tuple[Any, ...]] = [
    # a set-user-ID root program (mount, su) runs as its caller: the worker sets no_new_privs
    # for everything it starts, whatever other wall stands
    ("runs_with_no_new_privileges", "python",
     "status = open('/proc/self/status').read()\nassert 'NoNewPrivs:\\t1' in status, status\n",
     {PASSED}),
    # extended attributes (a default ACL among them) and inode flags, which a program could
    # leave on what it owns for the next to read or to be shut out by: not supported, as on a
    # file system without them
    ("sets_extended_attributes", "python",
     "import errno, os\nopen('f', 'w').close()\nfor path in ('f', '.', '/tmp'):\n"
     "    try:\n        os.setxattr(path, 'user.note', b'for the next')\n"
     "        raise AssertionError(path)\n    except OSError as exc:\n"
     "        assert exc.errno in (errno.ENOTSUP, errno.EPERM), exc\n"
     "assert os.listxattr('f') == []\n", {PASSED}),
    ("sets_inode_flags", "python",
     "import errno, fcntl\nwith open('f', 'w') as f:\n    try:\n"
     "        fcntl.ioctl(f, 0x40086602, (0x40).to_bytes(4, 'little'))\n"
     "        raise AssertionError('set')\n    except OSError as exc:\n"
     "        assert exc.errno == errno.ENOTTY, exc\n", {PASSED}),
    # (as root, the fork server is another uid's; without root, see test_nonroot.py)
    ("lowers_the_fork_server_s_limits", "python",
     "import os, resource\nresource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (8, 8))\n",
     {FAILED}),
    # the memory cgroup counts it; without one, the address-space limit stops the mapping
    ("shared_memory_bomb", "python", SHARED_MAPPING, {MEMORY, FAILED}),
    ("cpp_shared_memory_bomb", "cpp",
     "#include <sys/mman.h>\nint main() {\n  unsigned long n = 3ul << 30;\n"
     "  char *p = (char *)mmap(0, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);"
     "\n  if (p == MAP_FAILED) return 1;\n  for (unsigned long i = 0; i < n; i += 4096) p[i] = 1;"
     "\n}\n", {MEMORY, FAILED}),
    ("fork_bomb", "python", "import os\nwhile True:\n    os.fork()\n", {FAILED, TIMEOUT}),
    ("thread_bomb", "python",
     "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, "
     "args=(60,)).start()\n", {FAILED, TIMEOUT}),
    ("memory_bomb", "python", "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))\n",
     {MEMORY}),
    ("memory_bomb_numpy_free", "python", "x = 'a' * (4 * 1024**3)\n", {MEMORY}),
    ("infinite_loop", "python", "while True:\n    pass\n", {TIMEOUT}),
    ("ignores_sigterm", "python",
     "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n",
     {TIMEOUT}),
    ("sleep_forever", "python", "import time\ntime.sleep(3600)\n", {TIMEOUT}),
    # (from Python 3.12 the interpreter bounds its own C recursion: a RecursionError)
    ("deep_recursion_in_c", "python",
     "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6):\n    x = [x]\n"
     "str(x)\n", {CRASH} if sys.version_info < (3, 12) else {FAILED}),
    ("recursion_default_limit", "python", "def f(n):\n    return f(n + 1)\nf(0)\n", {FAILED}),
    ("segfault_ctypes", "python", "import ctypes\nctypes.string_at(0)\n", {CRASH}),
    ("stdout_flood", "python", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
     {FAILED}),
    ("big_file", "python", "open('big', 'wb').write(b'x' * (100 * 2**20))\n", {FAILED}),
    ("stdin_read_is_eof", "python", "import sys\nassert sys.stdin.read() == ''\n", {PASSED}),
    ("stdin_input_fails", "python", "input()\n", {FAILED}),
    ("setsid_grandchild_escapes", "python", ESCAPE, {PASSED}),
    ("background_sleeper", "python",
     "import subprocess\nsubprocess.Popen(['sleep', '100'])\nassert True\n", {PASSED}),
    ("write_private_tmp", "python", f"open('/tmp/{MARK}', 'w').write('x')\nassert True\n",
     {PASSED}),
    ("write_etc", "python", f"open('/etc/{MARK}', 'w').write('x')\n", {FAILED}),
    ("write_root_home", "python", f"open('/root/{MARK}', 'w').write('x')\n", {FAILED}),
    ("write_above_workdir", "python", f"open('../{MARK}', 'w').write('x')\n", {FAILED}),
    ("kill_parent", "python", "import os\nos.kill(os.getppid(), 9)\n", {FAILED}),
    # kill(-1) signals every process of the program's uid but itself: none in its PID namespace.
    # Linux reports success when it saw any other process (even one it may not signal), ESRCH
    # when it saw none, so both outcomes occur; the worker must survive either way.
    ("kill_everything", "python", "import os\nos.kill(-1, 9)\n", {PASSED, FAILED}),
    ("exit_before_asserts", "python", "exit(0)\nassert False\n", {FAILED}),
    ("os_exit_before_asserts", "python", "import os\nos._exit(0)\nassert False\n", {FAILED}),
    ("sys_exit_0", "python", "import sys\nsys.exit(0)\n", {FAILED}),
    ("prints_passed", "python", "print('passed')\nprint('OK')\nassert 1 == 2\n", {FAILED}),
    # This one SHOULD pass: the tests compare with ==, and a candidate whose __eq__ always says
    # True satisfies them as they are written; the program ran to the end honestly. A sandbox
    # judges execution, not the strength of the tests (assert isinstance(...) would catch it).
    ("eq_always_true", "python",
     "class Liar:\n    def __eq__(self, other):\n        return True\n"
     "def candidate():\n    return Liar()\nassert candidate() == [1, 2, 3]\n", {PASSED}),
    ("patch_import", "python",
     "import builtins\ndef deny(*a, **k):\n    raise ImportError('no')\n"
     "builtins.__import__ = deny\nassert 1 == 2\n", {FAILED}),
    ("patch_os", "python",
     "import os, sys\nos._exit = lambda *a: None\nos.write = lambda *a: 0\n"
     "sys.exit = lambda *a: None\nassert 1 == 2\n", {FAILED}),
    # the harness holds its own os and atexit functions: patched ones still let a pass through
    ("patch_os_then_pass", "python",
     "import atexit, os\nos._exit = os.write = os.getpid = lambda *a: 0\n"
     "atexit._run_exitfuncs = None\nassert 1 == 1\n", {PASSED}),
    ("close_stdout_then_fail", "python",
     "import os, sys\nos.close(1)\nos.close(2)\nsys.stdout = None\nassert 1 == 2\n", {FAILED}),
    ("close_stdout_then_pass", "python", "import os\nos.close(1)\nos.close(2)\nassert 1 == 1\n",
     {PASSED}),
    ("raise_limits", "python",
     "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6))\n", {FAILED}),
    ("become_root", "python", "import os\nos.setuid(0)\n", {FAILED}),
    ("read_worker_memory", "python",
     "import os\nopen(f'/proc/{os.getppid()}/mem', 'rb').read(1)\n", {FAILED}),
    ("huge_source", "python", "# " + "x" * 120 + "\n" * 1 + ("# filler\n" * 400_000)
     + "assert True\n", {PASSED}),
    ("non_utf8_bytes", "python", "s = '\udcff\udcfe'\nassert True\n", {SYNTAX_ERROR}),
    ("nul_bytes", "python", "x = 1\x00\nassert True\n", {SYNTAX_ERROR}),
    ("cpp_segfault", "cpp", "int main() { int *p = nullptr; *p = 1; }\n", {CRASH}),
    ("cpp_fork_bomb", "cpp",
     "#include <unistd.h>\nint main() { while (true) fork(); }\n", {TIMEOUT, CRASH, FAILED}),
    ("cpp_memory_bomb", "cpp",
     "#include <vector>\nint main() { std::vector<char*> v; while (true) v.push_back(new "
     "char[1 << 24]{1}); }\n", {MEMORY}),
    ("js_infinite_loop", "javascript", "while (true) {}\n", {TIMEOUT}),
    ("js_heap_bomb", "javascript", "const a = []; while (true) a.push(new Array(1e6).fill(1));\n",
     {MEMORY}),
    ("js_buffer_bomb", "javascript", "const a = [];\nwhile (true) a.push(Buffer.alloc(1 << 28));\n",
     {MEMORY}),
    ("real_time_signal", "python", "import os\nos.kill(os.getpid(), 40)\n", {CRASH}),
    ("cpp_real_time_signal", "cpp", "#include <csignal>\nint main() { raise(SIGRTMIN + 3); }\n",
     {CRASH}),
    ("traced_by_its_child", "python", TRACED_BY_ITS_CHILD, {PASSED}, Limits(timeout_s=3.0)),
    ("closes_the_report_fd", "python", "import os\nos.close(4)\nassert True\n", {FAILED}),
    # The harness has taken the token from fd 3 before the program runs: nothing to read there
    # and send early, from code, a constructor or a class that runs before the tests.
    ("sends_the_token_early", "python",
     "import os\nos.write(4, b'T' + os.read(3, 64))\nos._exit(0)\nassert False\n", {FAILED}),
    ("js_sends_the_token_early", "javascript", JS_SENDS_THE_TOKEN, {FAILED}),
    ("cpp_sends_the_token_early", "cpp", CPP_SENDS_THE_TOKEN % "int main() { send(); }",
     {FAILED}),
    ("cpp_sends_the_token_from_a_constructor", "cpp",
     CPP_SENDS_THE_TOKEN % "struct Early { Early() { send(); } } early;\nint main() {}",
     {FAILED}),
    # The process the token was read in must send it: here a child that a constructor forked
    # runs main and its tests, while the program's own process waits and exits as it did.
    ("cpp_runs_its_tests_in_a_child_forked_before_main", "cpp", CPP_TESTS_IN_A_FORKED_CHILD,
     {FAILED}),
    ("java_sends_the_token_early", "java", JAVA_SENDS_THE_TOKEN, {FAILED}),
    ("cpp_calls_the_harness_s_main_itself", "cpp", CPP_CALLS_THE_WRAPPER, {FAILED}),
    ("java_joins_the_harness_s_package", "java", JAVA_IN_THE_HARNESS_PACKAGE, {SYNTAX_ERROR}),
    *((f"java_joins_the_harness_s_package_as_{name}", "java",
       JAVA_IN_THE_HARNESS_PACKAGE_SPELT_ANEW % spelling, {SYNTAX_ERROR})
      for name, spelling in (("zero_width_space_escape", "\\u200b"), ("soft_hyphen", "\u00ad"),
                             ("control_escape", "\\u0001"))),
    # A handler of the program's own that keeps node going after an error nothing caught (the
    # tests stopped where it was thrown), in CommonJS and in an ES module, or after a rejection
    # nothing handled; an error the program catches itself is its own business.
    ("js_swallows_its_failure", "javascript",
     "process.on('uncaughtException', () => {});\nconst assert = require('assert');\n"
     "assert.strictEqual(1 + 1, 3);\n", {FAILED}),
    ("js_module_swallows_its_failure", "javascript",
     "import assert from 'node:assert';\nprocess.on('uncaughtException', () => {});\n"
     "await null;\nassert.strictEqual(1 + 1, 3);\n", {FAILED}),
    ("js_swallows_its_rejection", "javascript",
     "process.on('unhandledRejection', () => {});\nconst assert = require('assert');\n"
     "(async () => { await null; assert.strictEqual(1 + 1, 3); })();\n", {FAILED}),
    ("js_catches_its_own_error", "javascript",
     "process.on('uncaughtException', () => {});\nconst assert = require('assert');\n"
     "try { assert.strictEqual(1 + 1, 3); } catch (error) {}\nassert.strictEqual(1 + 1, 2);\n",
     {PASSED}),
    # node's "nothing left to run" (when the token goes out) raised by the program itself
    ("js_fakes_the_end", "javascript",
     "process.emit('beforeExit', 0);\nprocess.exit(0);\n", {FAILED}),
    ("js_fakes_the_end_from_a_promise", "javascript",
     "Promise.resolve(0).then(process.emit.bind(process, 'beforeExit'))\n"
     "  .then(() => process.exit(0));\n", {FAILED}),
    # ... from a promise, with node's own frames under it, while its (failing) test still
    # waits on a timer: node would not say it with a timer left
    ("js_fakes_the_end_before_its_timer", "javascript",
     "setImmediate(() => {\n"
     "  Promise.resolve().then(process.emit.bind(process, 'beforeExit', 0));\n});\n"
     "setTimeout(() => {\n  process.on('exit', () => { process.exitCode = 0; });\n"
     "  require('assert').strictEqual(1, 2);\n}, 50);\n", {FAILED}),
    # ... from a promise, with node's own frame alone under it and nothing left waiting, while
    # its (failing) tests wait in later reactions of promises
    ("js_fakes_the_end_from_an_immediate_s_promise", "javascript",
     "setImmediate(() => {\n"
     "  Promise.resolve().then(process.emit.bind(process, 'beforeExit', 0))\n"
     "    .then(() => process.exit(0));\n"
     "  Promise.resolve().then().then().then()\n"
     "    .then(() => require('assert').strictEqual(1, 2));\n});\n", {FAILED}),
    # ... on behalf of the process object (an async resource's scope), with node's frames for
    # as far down as a short window of the stack would look
    ("js_fakes_the_end_under_a_deep_stack_of_node_s_frames", "javascript", JS_DEEP_FAKE_END,
     {FAILED}),
    # ... with functions compiled under node's file names
    ("js_fakes_the_end_under_frames_named_as_node_s", "javascript", JS_NAMED_FAKE_END, {FAILED}),
    # ... from a signal's handler, which node calls itself (process.emit bound to it as node
    # starts listening), its resource made the process object through node's own symbol (an
    # HTTP parser's), or its async ids rewritten through process.binding('async_wrap'), while
    # its tests wait on work of node's thread pool (a zlib deflate)
    ("js_fakes_the_end_from_a_signal_s_handler", "javascript", JS_SIGNAL_FAKE_END, {FAILED}),
    ("js_fakes_the_end_from_a_signal_s_handler_with_node_s_ids", "javascript",
     JS_SIGNAL_FAKE_END_WITH_IDS, {FAILED}),
    # tests that fail after the token went out (in a listener of beforeExit or exit, or what one
    # started), their failure hidden from node's exit status or by a handler of the program's
    ("js_fails_in_a_later_before_exit_listener", "javascript",
     "process.on('exit', () => { process.exitCode = 0; });\n"
     "process.once('beforeExit', () => require('assert').strictEqual(1, 2));\n", {FAILED}),
    ("js_fails_in_an_exit_listener", "javascript",
     "process.on('exit', () => {\n  process.exitCode = 0;\n"
     "  require('assert').strictEqual(1, 2);\n});\n", {FAILED}),
    ("js_fails_after_the_end_behind_its_handler", "javascript",
     "process.on('uncaughtException', () => {});\nprocess.once('beforeExit', () => "
     "setImmediate(() => require('assert').strictEqual(1, 2)));\n", {FAILED}),
    # a stand-in for the process object that shows the harness's error monitor, which the
    # program took off the real one before it swallowed its failure
    ("js_hides_its_failure_behind_another_process", "javascript", JS_ANOTHER_PROCESS, {FAILED}),
    ("js_gives_a_handle_node_s_context", "javascript", JS_HANDLE_IN_NODE_S_CONTEXT, {FAILED}),
    ("js_replaces_the_harness_s_frame_reader", "javascript", JS_REPLACES_THE_FRAME_READER,
     {FAILED}),
    ("js_drops_its_report_through_node_s_fs_binding", "javascript", JS_DROPS_ITS_REPORT,
     {FAILED}),
    ("js_throws_between_a_report_s_writes", "javascript", JS_THROWS_BETWEEN_A_REPORT_S_WRITES,
     {FAILED}),
    ("js_promise_passes_for_the_process", "javascript", JS_PROMISE_PASSES_FOR_THE_PROCESS,
     {FAILED}),
    ("js_leaves_a_context_open", "javascript", JS_LEAVES_A_CONTEXT_OPEN, {FAILED}),
    ("js_overflows_out_of_a_context", "javascript", JS_OVERFLOWS_OUT_OF_A_CONTEXT, {FAILED}),
    ("js_closes_its_report_pipe", "javascript", JS_CLOSES_ITS_REPORT_PIPE, {FAILED}),
    ("js_enters_a_domain_of_its_own", "javascript", JS_ENTERS_A_DOMAIN_OF_ITS_OWN, {FAILED}),
    ("js_module_starts_its_tests_at_the_end", "javascript",
     JS_MODULE_STARTS_ITS_TESTS_AT_THE_END, {FAILED}),
    ("js_proxies_process_emit", "javascript", JS_PROXIES_PROCESS_EMIT, {FAILED}),
    ("js_hides_its_error_from_the_monitor", "javascript", JS_HIDES_ITS_ERROR_FROM_THE_MONITOR,
     {FAILED}),
    # node's processing of ticks and rejections, run by the candidate at the edge of the stack
    # once the tests' rejection is pending: it takes the rejection off its list and overflows
    # before reporting it
    ("js_overflows_node_s_rejection_processing", "javascript",
     "function add(a, b) { return a + b; }\nprocess.nextTick(() => {\n"
     "  Promise.resolve().then(() => {}).then(() => {}).then(() => {\n"
     "    const deep = () => {\n      try { deep(); } catch (_) {}\n"
     "      try { process._tickCallback(); } catch (_) {}\n    };\n    deep();\n  });\n});\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # the inspector's Runtime.terminateExecution in the first microtask drops the queue, the
    # tests' continuation with it, then node goes on to its own end
    ("js_terminates_its_microtasks", "javascript",
     "function add(a, b) { return a + b; }\n"
     "const session = new (require('inspector').Session)();\nsession.connect();\n"
     "Promise.resolve().then(() => {\n"
     "  session.post('Runtime.terminateExecution', () => {});\n  for (;;) {}\n});\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... as a vm's timeout does where node's processing of ticks and rejections runs under it
    ("js_times_out_node_s_tick_processing", "javascript",
     "function add(a, b) { return a + b; }\n{\n  const vm = require('vm');\n"
     "  let underVm = false;\n  Promise.resolve().then(() => { if (underVm) for (;;) {} });\n"
     "  process.nextTick(() => {\n    underVm = true;\n"
     "    globalThis.tick = () => process._tickCallback();\n"
     "    try { vm.runInThisContext('tick()', { timeout: 200 }); } catch (_) {}\n"
     "    underVm = false;\n  });\n}\nconst assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... from a worker thread given options of its own (through Object.prototype), which node
    # then started without the harness
    ("js_terminates_its_microtasks_from_a_bare_worker", "javascript",
     "function add(a, b) { return a + b; }\n{\n  Object.prototype.execArgv = [];\n"
     "  const { Worker } = require('worker_threads');\n"
     "  Promise.resolve().then(() => {\n    const end = Date.now() + 3000;\n"
     "    while (Date.now() < end) {}\n  });\n  new Worker(`\n"
     "    const session = new (require('inspector').Session)();\n"
     "    session.connectToMainThread();\n"
     "    session.post('Runtime.terminateExecution', () => session.disconnect());\n"
     "  `, { eval: true });\n  delete Object.prototype.execArgv;\n}\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... from a worker thread whose environment's NODE_OPTIONS (the env given, process.env's,
    # or one through Object.prototype) runs its --require before the harness's
    *[(f"js_terminates_its_microtasks_from_a_worker_s_node_options_{how}", "javascript",
       "function add(a, b) { return a + b; }\n{\n"
       "  require('fs').writeFileSync('first.js', `\n"
       "    const session = new (require('inspector').Session)();\n"
       "    session.connectToMainThread();\n"
       "    session.post('Runtime.terminateExecution', () => session.disconnect());\n  `);\n"
       "  const { Worker } = require('worker_threads');\n"
       "  Promise.resolve().then(() => {\n    const end = Date.now() + 3000;\n"
       "    while (Date.now() < end) {}\n  });\n"
       f"  {setup}new Worker('', {{ eval: true{options} }});\n}}\n"
       "const assert = require('node:assert');\n"
       "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
       {FAILED})
      for how, setup, options in [
          ("given", "", ", env: { NODE_OPTIONS: '--require ./first.js' }"),
          ("of_the_process", "process.env.NODE_OPTIONS = '--require ./first.js';\n  ",
           ", execArgv: []"),
          ("through_object_prototype",
           "Object.prototype.env = { NODE_OPTIONS: '--require ./first.js' };\n  ", "")]],
    # ... from a thread started with node's own constructor, reached from a worker's handle,
    # given no options (so none of the harness's)
    ("js_terminates_its_microtasks_from_a_thread_of_node_s_constructor", "javascript",
     "function add(a, b) { return a + b; }\n{\n"
     "  const { Worker, MessageChannel } = require('worker_threads');\n"
     "  const worker = new Worker('0', { eval: true });\n"
     "  const kHandle = Object.getOwnPropertySymbols(worker)\n"
     "    .find((symbol) => symbol.description === 'kHandle');\n"
     "  const Thread = worker[kHandle].constructor;\n"
     "  const handle = new Thread(null, null, [], new Float64Array(4).fill(-1), true, false);\n"
     "  handle.onexit = () => {};\n  const [a, b] = [new MessageChannel(), new MessageChannel()];\n"
     "  handle.messagePort.postMessage({ type: 'loadScript', doEval: 'classic', filename: `\n"
     "    const session = new (require('inspector').Session)();\n"
     "    session.connectToMainThread();\n"
     "    session.post('Runtime.terminateExecution', () => session.disconnect());\n  `,\n"
     "    isInternal: false, cwdCounter: new Int32Array(new SharedArrayBuffer(4)),\n"
     "    workerData: null, environmentData: new Map(), manifestURL: null, manifestSrc: null,\n"
     "    hasStdin: false, publicPort: a.port2, mainThreadPort: b.port2 }, [a.port2, b.port2]);\n"
     "  handle.startThread();\n  Promise.resolve().then(() => {\n"
     "    const end = Date.now() + 3000;\n    while (Date.now() < end) {}\n  });\n}\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... from the thread of a worker's loader hooks, registered, or named by a loader option
    # of its own, with execArgv through Object.prototype (node's options for that thread)
    *[(f"js_terminates_its_microtasks_from_a_worker_s_loader_hooks_{how}", "javascript",
       "function add(a, b) { return a + b; }\n{\n  const hooks = 'data:text/javascript,' +"
       " encodeURIComponent(`\n    import { Session } from 'node:inspector';\n"
       "    const session = new Session();\n    session.connectToMainThread();\n"
       "    session.post('Runtime.terminateExecution', () => session.disconnect());\n  `);\n"
       f"  new (require('worker_threads').Worker)(`{code}`, {{ eval: true{options} }});\n"
       "  Promise.resolve().then(() => {\n    const end = Date.now() + 3000;\n"
       "    while (Date.now() < end) {}\n  });\n}\nconst assert = require('node:assert');\n"
       "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
       {FAILED})
      for how, code, options in [
          ("registered", "\n    Object.prototype.execArgv = [];\n"
           "    require('module').register(${JSON.stringify(hooks)});\n  ", ""),
          ("named", "\n    Object.prototype.execArgv = ['--experimental-loader', "
           "${JSON.stringify(hooks)}];\n    import('node:fs').catch(() => {});\n  ",
           ", execArgv: ['--experimental-loader', 'data:text/javascript,']")]],
    # a heap snapshot of its own (node's own API) lists the strings the harness holds: the
    # token and the key are bytes there until they go out
    ("js_finds_the_token_in_a_heap_snapshot", "javascript",
     "function add(a, b) { return a + b; }\n{\n  const fs = require('fs');\n"
     "  const s = JSON.parse(fs.readFileSync(require('v8').writeHeapSnapshot('/tmp/h'), 'utf8'));\n"
     "  const m = s.snapshot.meta, width = m.node_fields.length;\n"
     "  const name = m.node_fields.indexOf('name'), type = m.node_fields.indexOf('type');\n"
     "  const string = m.node_types[0].indexOf('string');\n"
     "  for (let n = 0; n < s.nodes.length; n += width) {\n"
     "    const text = s.strings[s.nodes[n + name]];\n"
     "    if (s.nodes[n + type] === string && text.length === 16 && /[^\\w.\\/ :-]/.test(text)) {\n"
     "      fs.writeSync(4, 'T' + text, null, 'latin1');\n    }\n  }\n"
     "  process.reallyExit(0);\n}\nconst assert = require('node:assert');\n"
     "assert.strictEqual(add(1, 2), 4);\n", {FAILED}),
    # ... nor through v8.queryObjects's summary, which shows every live Uint8Array with its
    # bytes, the harness's too (its count stays, as a valid program uses it)
    ("js_finds_the_token_with_query_objects", "javascript",
     "function add(a, b) { return a + b; }\n{\n  const fs = require('fs');\n"
     "  for (const text of require('v8').queryObjects(Uint8Array, { format: 'summary' })) {\n"
     "    const bytes = (text.slice(text.indexOf('[')).match(/\\d+/g) || []).map(Number);\n"
     "    if (bytes.length === 64 && bytes.slice(0, 32).some((x) => x)) {\n"
     "      fs.writeSync(4, 'T' + Buffer.from(bytes.slice(0, 16)).toString('latin1'), null,\n"
     "                   'latin1');\n    }\n  }\n  process.reallyExit(0);\n}\n"
     "const assert = require('node:assert');\nassert.strictEqual(add(1, 2), 4);\n", {FAILED}),
    ("js_counts_objects_of_a_class", "javascript",
     "class Point {}\nconst points = [new Point(), new Point()];\n"
     "require('node:assert').strictEqual(require('v8').queryObjects(Point), points.length);\n",
     {PASSED}),
    # valid: a package.json left in /tmp or in the working directory (where node would look as
    # it loaded a --require) says "module" or is no JSON at all, and worker threads still run
    *[(f"js_package_json_left_in_{where}_{how}", "javascript",
       "const fs = require('node:fs');\nconst { Worker } = require('node:worker_threads');\n"
       f"fs.writeFileSync('{folder}package.json', '{text}');\nlet got;\n"
       "new Worker('require(\"worker_threads\").parentPort.postMessage(6 * 7)', { eval: true })\n"
       "  .on('message', (m) => { got = m; })\n"
       "  .on('exit', () => require('node:assert').strictEqual(got, 42));\n", {PASSED})
      for where, folder in [("tmp", "/tmp/"), ("working_directory", "")]
      for how, text in [("module", '{"type": "module"}'), ("broken", '{"name": "x",')]],
    # ... from a worker thread in which node would have loaded a file of the program's in the
    # harness's place: a package.json in the working directory whose name the harness's path
    # starts with (or "", which every absolute path does) and whose "exports" point at it
    *[(f"js_terminates_its_microtasks_from_a_worker_s_self_reference_{how}", "javascript",
       js_worker_attack("  const fs = require('fs');\n"
                        f"  fs.writeFileSync('evil.js', `{JS_EVIL}`);\n"
                        f"  fs.writeFileSync('package.json', JSON.stringify({package}));\n",
                        options), {FAILED})
      for how, package, options in [
          ("of_every_path", "{ name: '', exports: { './*': './evil.js' } }", ""),
          ("given_options", "{ name: '', exports: { './*': './evil.js' } }",
           ", execArgv: ['--no-warnings']"),
          ("by_its_path", "{ name: require.cache[Object.keys(require.cache)[0]].filename,\n"
           "    exports: { '.': './evil.js' } }", "")]],
    # ... or from one whose harness file the program changed first, where it may write it
    # (without root, the harness's folder is a read-only mount of the worker's)
    ("js_changes_the_harness_file_for_its_worker_threads", "javascript",
     js_worker_attack("  const fs = require('fs');\n  try {\n"
                      f"    fs.writeFileSync(Object.keys(require.cache)[0], `{JS_EVIL}`);\n"
                      "  } catch (_) {}\n"), {FAILED}),
    # ... or from one whose script, as node's constructor sends it (LOAD_SCRIPT), the program
    # changed (through MessagePort.prototype.postMessage, or an async hook given each port):
    # the harness runs first, from the thread's options
    *[(f"js_terminates_its_microtasks_from_a_worker_s_script_through_{how}", "javascript",
       js_worker_attack(f"  const evil = `{JS_EVIL}`;\n{setup}"), {FAILED})
      for how, setup in [
          ("the_prototype",
           "  const proto = MessagePort.prototype, send = proto.postMessage;\n"
           "  proto.postMessage = function (message, list) {\n"
           "    if (message && message.type === 'loadScript') message.filename = evil;\n"
           "    return send.call(this, message, list);\n  };\n"),
          ("an_async_hook",
           "  require('async_hooks').createHook({ init(id, type, trigger, port) {\n"
           "    if (type !== 'MESSAGEPORT') return;\n    const send = port.postMessage;\n"
           "    port.postMessage = function (message, list) {\n"
           "      if (message && message.type === 'loadScript') message.filename = evil;\n"
           "      return send.call(this, message, list);\n    };\n  } }).enable();\n")]],
    # ... or from one started from a folder of its own named node_modules, renamed once node
    # kept its path (node would read a package.json there as it loads the thread's harness)
    ("js_terminates_its_microtasks_from_a_worker_in_a_renamed_folder", "javascript",
     js_worker_attack("  const fs = require('fs');\n"
                      "  fs.mkdirSync('/tmp/r/node_modules', { recursive: true });\n"
                      f"  fs.writeFileSync('/tmp/r/node_modules/evil.js', `{JS_EVIL}`);\n"
                      "  fs.writeFileSync('/tmp/r/node_modules/package.json',\n"
                      "                   JSON.stringify({ name: '', exports: { './*': "
                      "'./evil.js' } }));\n"
                      "  process.chdir('/tmp/r/node_modules');\n  process.cwd();\n"
                      "  fs.renameSync('/tmp/r/node_modules', '/tmp/r/package');\n"), {FAILED}),
    # ... or from one started from a folder of its own (where node would read its
    # package.json), or after it changed directory to one: refused
    *[(f"js_worker_thread_from_another_folder_{how}", "javascript",
       f"{setup}new (require('worker_threads').Worker)('', {{ eval: true }});\n{after}",
       {FAILED})
      for how, setup, after in [
          ("before", "process.chdir('/tmp');\n", ""),
          ("after", "", "process.chdir('/tmp');\n")]],
    # ... from the thread of loader hooks (module.register) that node started with execArgv
    # read through Object.prototype, without the harness
    ("js_terminates_its_microtasks_from_bare_loader_hooks", "javascript",
     "function add(a, b) { return a + b; }\n{\n  const hooks = `\n"
     "    import { Session } from 'node:inspector';\n    setTimeout(() => {\n"
     "      const session = new Session();\n      session.connectToMainThread();\n"
     "      session.post('Runtime.terminateExecution', () => session.disconnect());\n"
     "    }, 300);\n    export async function resolve(s, c, next) { return next(s, c); }\n  `;\n"
     "  Object.prototype.execArgv = [];\n"
     "  require('module').register('data:text/javascript,' + encodeURIComponent(hooks));\n"
     "  delete Object.prototype.execArgv;\n  Promise.resolve().then(() => {\n"
     "    const end = Date.now() + 3000;\n    while (Date.now() < end) {}\n  });\n}\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... or V8's own run of the microtask queue (natives syntax, its flag set at run time)
    # under a vm timeout
    ("js_times_out_v8_s_microtask_run", "javascript",
     "function add(a, b) { return a + b; }\n{\n"
     "  require('v8').setFlagsFromString('--allow-natives-syntax');\n"
     "  const vm = require('vm');\n  Promise.resolve().then(() => { for (;;) {} });\n"
     "  process.nextTick(() => {\n    try {\n"
     "      vm.runInThisContext('%PerformMicrotaskCheckpoint()', { timeout: 200 });\n"
     "    } catch (_) {}\n  });\n}\nconst assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... from a call of node's tick processing nested in one of the program's that returns
    ("js_times_out_nested_tick_processing", "javascript",
     "function add(a, b) { return a + b; }\nconst vm = require('vm');\nlet armed = false;\n"
     "Promise.resolve().then(() => { if (armed) for (;;); });\nprocess.nextTick(() => {\n"
     "  process.nextTick(() => {\n    armed = true;\n    try {\n"
     "      vm.runInThisContext('process._tickCallback()', { timeout: 100 });\n"
     "    } catch (_) {}\n  });\n  process._tickCallback();\n});\n"
     "const assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... natives syntax set by a flag that implies it
    ("js_times_out_v8_s_microtask_run_by_implication", "javascript",
     "function add(a, b) { return a + b; }\n{\n  const v8 = require('v8');\n"
     "  v8.setFlagsFromString('--allow-natives-for-differential-fuzzing');\n"
     "  v8.setFlagsFromString('--no-allow-natives-for-differential-fuzzing');\n"
     "  v8.setFlagsFromString('--no-fuzzing');\n  const vm = require('vm');\n"
     "  Promise.resolve().then(() => { for (;;) {} });\n  process.nextTick(() => {\n    try {\n"
     "      vm.runInThisContext('%PerformMicrotaskCheckpoint()', { timeout: 200 });\n"
     "    } catch (_) {}\n  });\n}\nconst assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # ... by its name, through a RegExp.prototype.test and a Reflect.apply of the program's,
    # which skipped the check of the name and the flag's reset
    ("js_times_out_v8_s_microtask_run_through_its_own_apply", "javascript",
     "function add(a, b) { return a + b; }\n{\n"
     "  const test = RegExp.prototype.test, call = Function.prototype.call;\n"
     "  const reflectApply = Reflect.apply;\n  RegExp.prototype.test = () => false;\n"
     "  Reflect.apply = (f, self, args) =>\n"
     "    (args[0] === '--no-allow-natives-syntax' ? undefined : call.call(f, self, ...args));\n"
     "  try {\n    require('v8').setFlagsFromString('--allow-natives-syntax');\n"
     "  } catch (_) {}\n  RegExp.prototype.test = test;\n  Reflect.apply = reflectApply;\n"
     "  const vm = require('vm');\n  Promise.resolve().then(() => {\n"
     "    const end = Date.now() + 2000;\n    while (Date.now() < end) {}\n  });\n"
     "  process.nextTick(() => {\n    try {\n"
     "      vm.runInThisContext('%PerformMicrotaskCheckpoint()', { timeout: 200 });\n"
     "    } catch (_) {}\n  });\n}\nconst assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # V8's flags that print what each frame holds as an exception is thrown, or each call's
    # arguments, the harness's among them, are refused (any spelling): a pass only where all were
    ("js_v8_tracing_refused", "javascript",
     "function add(a, b) { return a + b; }\nconst v8 = require('v8'), refused = [];\n"
     "for (const flag of ['--print-all-exceptions', '--print_all_exceptions', '--trace',\n"
     "                    '--trace-deopt-verbose']) {\n"
     "  try { v8.setFlagsFromString(flag); } catch (_) { refused.push(flag); }\n}\n"
     "try { null.x; } catch (_) {}\nconst assert = require('node:assert');\n"
     "assert.strictEqual(refused.length, 4);\nassert.strictEqual(add(1, 2), 3);\n", {PASSED}),
    # a getter of process.domain that throws where node reads it to record the tests' rejection
    ("js_throws_where_node_records_a_rejection", "javascript",
     "function add(a, b) { return a + b; }\n"
     "Object.defineProperty(process, 'domain', { configurable: true, get() { throw 0; },"
     " set() {} });\nconst assert = require('node:assert');\n"
     "async function test() { await null; assert.strictEqual(add(1, 2), 4); }\ntest();\n",
     {FAILED}),
    # the inspector's Runtime.terminateExecution ends the main module before its tests, then
    # node goes on to its own end
    ("js_terminates_its_main_module", "javascript",
     "function add(a, b) { return a + b; }\n"
     "{\n  const session = new (require('inspector').Session)();\n  session.connect();\n"
     "  session.post('Runtime.terminateExecution', () => {});\n}\n"
     "const assert = require('node:assert');\nassert.strictEqual(add(1, 2), 4);\n", {FAILED}),
    # a CommonJS candidate that passes for an ES module (its own function named after node's
    # module runner adds an 'exit' listener, as the runner does for an ES module), so that
    # its top-level `return` before the tests passes for the module's end
    ("js_passes_for_an_es_module_to_return_early", "javascript",
     "function add(x, y) { return x - y; }\n"
     "require('vm').runInThisContext(\"(function () { process.on('exit', () => {}); })\",\n"
     "                               {filename: 'node:internal/modules/run_main'})();\n"
     "return;\nconst assert = require('node:assert');\n"
     "assert.deepEqual(add(5, 7), 12);\n", {FAILED}),
    ("finds_the_token_in_the_harness_s_objects", "python", FINDS_THE_TOKEN, {FAILED}),
    ("cpp_ifunc_takes_the_token_first", "cpp", CPP_IFUNC_TAKES_THE_TOKEN, {SYNTAX_ERROR}),
    ("cpp_loader_s_function_takes_the_token_first", "cpp",
     CPP_LOADER_S_FUNCTION_TAKES_THE_TOKEN, {SYNTAX_ERROR}),
    ("cpp_names_its_own_loader", "cpp", CPP_NAMES_ITS_OWN_LOADER, {SYNTAX_ERROR}),
    ("cpp_relocation_of_its_own", "cpp", CPP_RELOCATION_OF_ITS_OWN, {SYNTAX_ERROR, FAILED, CRASH}),
    ("cpp_preinit_array_behind_a_decoy", "cpp", CPP_PREINIT_ARRAY_BEHIND_A_DECOY,
     {SYNTAX_ERROR, FAILED, CRASH}),
    # ... or one in read-only memory, for which the loader would make the code and the
    # relocations writable while it relocates (DT_TEXTREL): later relocations of the program's
    # then rewrote the harness's code or the linker's relocations
    # ... nor a section of its own that makes the loader's tables writable, where a relocation
    # of its own rewrote one of the linker's
    ("cpp_rewrites_the_loader_s_relocations", "cpp",
     CPP_REWRITES_THE_LOADER_S_TABLES % ("", "0x9b0UL", ""), {SYNTAX_ERROR}),
    ("cpp_makes_the_loader_s_tables_writable_by_their_names", "cpp",
     CPP_REWRITES_THE_LOADER_S_TABLES % (
         "const", "0x9b8UL", '__attribute__((section(".dynstr"), used)) char byte[1] = {0};'),
     {SYNTAX_ERROR}),
    ("cpp_copies_the_loader_s_function", "cpp", CPP_COPIES_THE_LOADER_S_FUNCTION, {SYNTAX_ERROR}),
    # ... the same relocation in a loaded section of the relocations' type under another name
    # (the type in the section attribute: no asm), which the linker merges with its own, or in
    # one that is not loaded and names no section to relocate (red-team round 9)
    ("cpp_copies_the_loader_s_function_by_a_section_type", "cpp",
     CPP_COPIES_THE_LOADER_S_FUNCTION.replace('section(".rela.data.zz")',
                                              'section(".xyz,\\"a\\",@4 #")'), {SYNTAX_ERROR}),
    # ... or a copy relocation against a symbol of its own in unloaded sections typed as
    # dynamic symbols and relocations, which the loader never reads and the executable's check
    # once read as the linker's (red-team round 10)
    ("cpp_copies_the_loader_s_function_by_unloaded_tables", "cpp",
     CPP_COPIES_THE_LOADER_S_FUNCTION.replace(
         '__attribute__((section(".rela.data.zz"), used, aligned(8)))\n'
         "const unsigned long inj[3] = {0x5140UL, (23UL << 32) | 5, 0};",
         "struct FakeSym { unsigned name; unsigned char info, other; unsigned short shndx; "
         "unsigned long value, size; };\n"
         '__attribute__((section(".yy,\\"\\",@11 #"), used, aligned(8)))\n'
         "const FakeSym fake_sym = {362, 0x11, 0, 1, 0x10, 0};\n"
         '__attribute__((section(".zz,\\"\\",@4 #"), used, aligned(8)))\n'
         "const unsigned long fake_copy[3] = {0x10, (24UL << 32) | 5, 0};"), {SYNTAX_ERROR}),
    # ... or code for the linker to compile (link-time optimisation's bytecode, which a program
    # wrote with asm: the link made the sections the object check refuses, red-team round 11),
    # nor any section excluded from the output
    *((f"cpp_leaves_code_to_the_linker_{name}", "cpp",
       f'asm(".section {section},\\"{flags}\\",@progbits\\n.byte 1\\n.previous\\n");\n'
       "#include <cassert>\nint main() { assert(1 == 2); }\n", {SYNTAX_ERROR})
      for name, section, flags in (("lto", ".gnu.lto_.decls.0", "e"),
                                   ("offload", ".gnu.offload_lto_.x", ""),
                                   ("llvm", ".llvmbc", ""),
                                   ("excluded", ".mine", "e"))),
    ("cpp_copies_the_loader_s_function_unloaded", "cpp",
     CPP_COPIES_THE_LOADER_S_FUNCTION.replace(
         '__attribute__((section(".rela.data.zz"), used, aligned(8)))\n'
         "const unsigned long inj[3] = {0x5140UL, (23UL << 32) | 5, 0};",
         'asm(".section .rela.data.zz,\\"\\",@4\\n.balign 8\\n.quad 0x5140\\n'
         '.quad (23<<32)|5\\n.quad 0\\n.previous\\n");'), {SYNTAX_ERROR}),
    # ... or any other section named like those the linker makes for the loader (the program's
    # object is read before it is linked), ``.dynamic`` entries past its end among them, which
    # the loader never reads and the checks of the executable once did (red-team round 8)
    *((f"cpp_names_a_section_{name}", "cpp",
       f'__attribute__((section("{name}"), used, aligned(8))) const unsigned long x[2] = {{7, 0}};'
       "\n#include <cassert>\nint main() { assert(1 == 2); }\n", {SYNTAX_ERROR})
      for name in (".dynamic", ".rel.zz", ".relr.dyn", ".got", ".got.plt", ".plt.sec",
                   ".dynsym", ".gnu.version_r", ".interp", ".gnu.hash")),
    # a writable section of the program's that the linker puts beside the loader's tables (a
    # note's name: valid C++) makes them writable: refused, by the check of the executable
    ("cpp_writable_note_section", "cpp",
     '__attribute__((section(".note.mine"), used)) int table[4] = {1, 2, 3, 4};\n'
     "#include <cassert>\nint main() { assert(++table[1] == 3); }\n", {SYNTAX_ERROR}),
    ("cpp_relocates_read_only_memory", "cpp",
     "#include <cassert>\nint f() { return 0; }\n"
     "asm(\".section .rodata.mine,\\\"a\\\"\\n.quad _Z1fv\\n.text\\n\");\n"
     "int main() { assert(f() == 1); }\n", {SYNTAX_ERROR}),
    # a process of the program's attaches to its JVM (jcmd), through which it could load an
    # agent there: refused
    ("java_cannot_attach_to_its_own_jvm", "java",
     "class Problem {\n  public static void main(String[] a) throws Exception {\n"
     "    Process p = new ProcessBuilder(\"jcmd\", Long.toString(ProcessHandle.current().pid()),"
     "\n        \"VM.version\").redirectErrorStream(true).start();\n"
     "    String out = new String(p.getInputStream().readAllBytes());\n"
     "    assert p.waitFor() != 0 : \"attached: \" + out;\n  }\n}\n", {PASSED}),
    # ... nor does the program load an agent into its JVM itself, through its management beans
    ("java_loads_an_agent_in_process", "java", JAVA_LOADS_AN_AGENT, {FAILED}),
    # a report the harness makes counts only with the token after it (a failure stays one)
    ("forges_a_syntax_error", "python", "import os\nos.write(4, b'S')\nassert 1 == 2\n",
     {FAILED}),
    ("forges_out_of_memory", "python", "import os\nos.write(4, b'M')\nassert 1 == 2\n",
     {FAILED}),
    ("cpp_forges_a_syntax_error", "cpp",
     "#include <cassert>\n#include <unistd.h>\n"
     "int main() { write(4, \"S\", 1); assert(1 == 2); }\n", {FAILED}),
    ("js_forges_out_of_memory", "javascript",
     "require('fs').writeSync(4, 'M');\nrequire('assert').strictEqual(1, 2);\n", {FAILED}),
    # ... nor with the key of another report after it, read back from the report pipe
    ("reads_back_its_report", "python", READS_BACK_ITS_REPORT, {FAILED}),
    ("js_reads_back_its_report", "javascript", JS_READS_BACK_ITS_REPORT, {FAILED}),
    ("java_reads_back_its_report", "java", JAVA_READS_BACK_ITS_REPORT, {FAILED}),
    # constants the compiler folds in time quadratic in the chain: compiled under the limits
    ("constant_folding_bomb", "python", "x = " + " + ".join(["'a' * 4096"] * 1500) + "\n",
     {TIMEOUT, MEMORY}, Limits(timeout_s=1.0)),
    # code the compiler takes time or memory to compile that grows with the cube of its size
    ("or_pattern_compile_bomb", "python", _or_pattern_bomb(), {TIMEOUT, MEMORY},
     Limits(timeout_s=1.0)),
    ("or_pattern_compile_bomb_in_utf7", "python", UTF7_OR_PATTERN_BOMB, {TIMEOUT, MEMORY},
     Limits(timeout_s=1.0)),
    ("forges_a_sandbox_error", "python",
     "import os\nos.write(4, b'B' + os.read(3, 64) + b' no')\nos._exit(70)\n", {FAILED}),
    ("raises_in_the_harness", "python", RAISES_IN_THE_HARNESS, {FAILED}),
    ("profile_clears_the_failure", "python", PROFILE_CLEARS_THE_FAILURE, {FAILED}),
    ("trace_clears_the_failure", "python", TRACE_CLEARS_THE_FAILURE, {FAILED}),
    ("key_clears_the_failure", "python", KEY_CLEARS_THE_FAILURE, {FAILED}),
    ("forked_child_claims_the_token", "python", FORKED_CHILD_CLAIMS_THE_TOKEN, {FAILED}),
    ("traces_its_own_thread", "python", TRACED_THREAD, {PASSED, TIMEOUT}, Limits(timeout_s=2.0)),
    ("removes_sys_stdout", "python", "import sys\ndel sys.stdout, sys.stderr\nassert True\n",
     {PASSED}),
    ("keyring", "python", KEYRING, {PASSED}),
    ("js_exit_before_asserts", "javascript",
     "process.exit(0);\nrequire('assert').strictEqual(1, 2);\n", {FAILED}),
    ("java_exit_before_asserts", "java",
     "class Problem { public static void main(String[] a) { System.exit(0); assert false; } }\n",
     {FAILED}),
    # a candidate that declares a public class with a main of its own: the tests' main runs
    ("java_public_main_before_the_tests", "java",
     "public class Main { public static void main(String[] a) {} }\n"
     "class Problem { public static void main(String[] a) { assert false; } }\n", {FAILED}),
    # ... or hides the tests' class from the harness's reading of the file, where javac sees it:
    # a carriage return ends a line comment; a character javac drops from identifiers makes
    # no comment end inside one
    *((f"java_main_hidden_{name}", "java",
       "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
       f"  public static void main(String[] x) {{ }}\n{hiding}}} class Hidden {{\n"
       "  static int add(int a, int b) { return a - b; }\n"
       "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED})
      for name, hiding in (("by_a_carriage_return", "// \r"),
                           ("by_an_escaped_carriage_return", "// \\u000d"),
                           ("by_an_ignorable_character", "/* *\u200b/ // */"))),
    # ... or hides them from the harness's reading of the file behind escapes javac reads
    # otherwise than the JLS's rule: after an escaped backslash (\u005c), \u0022 is a quote,
    # so the harness saw a comment to the end of the file, and \u000a a line end, so the
    # harness saw a line comment where javac closed the class
    ("java_main_hidden_by_an_escaped_backslash_s_quote", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
     "  static class Fake { public static void main(String[] a) { } }\n"
     '  static String s = "\\u005c\\\\u0022 + "/*";\n'
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED}),
    ("java_main_hidden_by_an_escaped_backslash_s_line_end", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
     "  public static void main(String[] a) { }\n"
     "  // \\u005c\\\\u000a } class Hidden extends Problem {\n"
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED}),
    # ... or behind an escape whose hex digits javac reads and the harness did not (Arabic-Indic
    # digits: a line end), or a format character javac keeps in a name (one above the Basic
    # Multilingual Plane, which javac does not leave out: Pro\U000e0001blem is no Problem)
    ("java_main_hidden_by_an_escape_of_other_digits", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
     "  public static void main(String[] a) { }\n"
     "// \\u\u0660\u0660\u0660a } class Y extends Problem {\n"
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED}),
    ("java_main_hidden_by_a_format_character_above_the_bmp", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
     "  public static void main(String[] a) { }\n}\n"
     "class Pro\U000e0001blem extends Problem {\n"
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED}),
    # ... or behind an escaped high surrogate with no low half before a backslash, which javac
    # reads again with the state its look for the low half left (refused); a whole pair, which
    # javac joins into one character of a name, runs the tests
    ("java_main_hidden_by_a_lone_surrogate", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n}\nclass C {\n"
     "  public static void main(String[] a) { }\n"
     "  // \\uD800\\\\u000a } class T extends Problem {\n"
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {SYNTAX_ERROR}),
    ("java_tests_in_a_class_named_with_an_escaped_pair", "java",
     "class Problem {\n  static int add(int a, int b) { return a - b; }\n}\n"
     "class P\\uD835\\uDC00 extends Problem {\n"
     "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n", {FAILED}),
    # ... or makes the tests' main no main the launcher runs, by a type of its own named
    # String (a member of the tests' class, or at top level), so that a main(java.lang.String[])
    # of its own (inherited, or an overload) would run in its place
    *((f"java_shadows_string_{name}", "java",
       "class Problem {\n  static int add(int a, int b) { return a - b; }\n}\n"
       f"{decoy}\n  static int add(int a, int b) {{ return a - b; }}\n"
       "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n",
       {SYNTAX_ERROR})
      for name, decoy in (
          ("as_a_member", "class Base { public static void main(java.lang.String[] a) {} }\n"
                          "class Fake extends Base {\n  static class String {}"),
          ("at_top_level", "class String {}\nclass Fake {\n"
                           "  public static void main(java.lang.String[] a) {}"))),
    # ... or ends the file for javac (a SUB character: raw, or as a Unicode escape) before them
    *((f"java_ends_the_file_before_the_tests_{name}", "java",
       "class Problem {\n  static int add(int a, int b) { return a - b; }\n"
       f"  public static void main(String[] x) {{ }}\n}}\n{sub}\nclass Problem {{\n"
       "  static int add(int a, int b) { return a - b; }\n"
       "  public static void main(String[] args) { assert add(2, 3) == 5; }\n}\n",
       {SYNTAX_ERROR}) for name, sub in (("raw", "\x1a"), ("escaped", "\\u001a"))),
    # a byte UTF-8 cannot decode (read with surrogateescape), which javac refuses anywhere: in
    # a comment, or in the name of the public class, after which the file is named (a sandbox
    # error once: the name did not reach the compile server, red team)
    *((f"java_holds_a_byte_not_utf8_{name}", "java",
       f"public class {public} {{\n  // caf\udce9\n"
       "  public static void main(String[] a) { }\n}\n",
       {SYNTAX_ERROR}) for name, public in (("in_a_comment", "Problem"),
                                            ("in_the_public_class_s_name", "Pr\udc80oblem"))),
    # an ES module's await that never settles, before the tests, with the status node would
    # give it (13) taken away: the tests never ran
    ("js_awaits_forever_before_the_tests", "javascript",
     "process.exitCode = 0;\nawait new Promise(() => {});\n"
     "const assert = require('node:assert');\nassert.strictEqual(1, 2);\n", {FAILED}),
    # ... or that has its own loader hooks resolve the harness's import of it to another module
    ("js_redirects_the_harness_s_import", "javascript",
     "const { register } = await import('node:module');\n"
     "register('data:text/javascript,' + encodeURIComponent(`export async function resolve(s, c, "
     "n) { if (s.endsWith('program.js')) return { url: 'data:text/javascript,', shortCircuit: "
     "true }; return n(s, c); }`));\nprocess.exitCode = 0;\nawait new Promise(() => {});\n"
     "import assert from 'node:assert';\nassert.strictEqual(1, 2);\n", {FAILED}),
    # a CommonJS module's top-level return, before the tests
    ("js_enters_node_s_own_context", "javascript", JS_ENTERS_NODE_S_OWN_CONTEXT, {FAILED}),
    ("js_fakes_the_frames_through_object_prototype", "javascript",
     JS_FAKES_THE_FRAMES_THROUGH_OBJECT_PROTOTYPE, {FAILED}),
    ("js_settles_its_import_early", "javascript", JS_SETTLES_ITS_IMPORT_EARLY, {FAILED}),
    # ... through its own Promise.prototype.then alone, which the promise node resolves the
    # import with, another promise, is adopted through
    # ... or that says node's fatal exceptions are handled (process._fatalException), so that
    # the harness never hears of the failure
    ("js_handles_node_s_fatal_exceptions", "javascript",
     "function f(x) { process._fatalException = () => true; return 999; }\n"
     "require('node:assert').deepEqual(f(1), 2);\n", {FAILED}),
    # ... or that takes the harness's monitor off and adds a stand-in naming it as its .listener
    ("js_stands_in_for_the_harness_s_monitor", "javascript",
     "function f(x) {\n  const [m] = process.listeners('uncaughtExceptionMonitor');\n"
     "  process.removeListener('uncaughtExceptionMonitor', m);\n"
     "  const standIn = () => {};\n  standIn.listener = m;\n"
     "  process.on('uncaughtExceptionMonitor', standIn);\n"
     "  process.on('uncaughtException', () => {});\n  return 999;\n}\n"
     "require('node:assert').deepEqual(f(1), 2);\n", {FAILED}),
    # ... or whose failure after the token would have gone out with typed arrays' byteLength 0
    ("js_empties_the_report_after_the_token", "javascript",
     "function f(x) {\n  return new Promise((resolve) => {\n"
     "    process.on('uncaughtException', () => {});\n    process.on('beforeExit', () => {\n"
     "      const proto = Object.getPrototypeOf(Uint8Array.prototype);\n"
     "      Object.defineProperty(proto, 'byteLength',\n"
     "                            { configurable: true, get() { return 0; } });\n"
     "      resolve(999);\n    });\n  });\n}\n"
     "(async () => require('node:assert').deepEqual(await f(1), 2))();\n", {FAILED}),
    # ... or that skips the harness's monitor where node's emitter calls it, through its
    # `apply` (an own one on the listener, or Function.prototype's)
    ("js_skips_the_harness_s_monitor_through_its_apply", "javascript",
     "function f(x) { return x + 100; }\n"
     "for (const m of process.rawListeners('uncaughtExceptionMonitor')) {\n"
     "  Object.defineProperty(m, 'apply', { value() {}, configurable: true });\n}\n"
     "process.on('uncaughtException', () => {});\n"
     "require('node:assert').deepEqual(f(1), 2);\n", {FAILED}),
    ("js_skips_the_harness_s_monitor_through_function_apply", "javascript",
     "function f(x) { return x + 100; }\nconst realApply = Function.prototype.apply;\n"
     "Function.prototype.apply = function (self, args) {\n"
     "  if (self === process && args && args[1] === 'uncaughtException' && this !== onErr) {\n"
     "    return undefined;\n  }\n  return Reflect.apply(this, self, args);\n};\n"
     "function onErr() { Function.prototype.apply = realApply; }\n"
     "process.on('uncaughtException', onErr);\n"
     "require('node:assert').deepEqual(f(1), 2);\n", {FAILED}),
    ("js_settles_its_import_through_its_then", "javascript",
     "const nativeThen = Promise.prototype.then;\nlet armed = false;\n"
     "Promise.prototype.then = function then(onFulfilled, onRejected) {\n"
     "  if (armed && String(onFulfilled).includes('[native code]')) {\n"
     "    onFulfilled(Object.create(null));\n    return undefined;\n  }\n"
     "  return Reflect.apply(nativeThen, this, [onFulfilled, onRejected]);\n};\n"
     "process.on('beforeExit', () => { armed = true; });\nprocess.exitCode = 0;\n"
     "await new Promise(() => {});\n(await import('node:assert')).deepEqual(1, 2);\n",
     {FAILED}),
    # ... or that returns early where the harness's compile of it, after its code ran, failed
    # for other reasons (a getter on Object.prototype that node's compileFunction reads, V8's
    # flags changed), and so took it for an ES module
    *((f"js_returns_and_breaks_the_harness_s_compile_{name}", "javascript",
       f"function f(x) {{ return x; }}\n{breaks}\nreturn;\n"
       "require('node:assert').deepEqual(f(1), 2);\n", {FAILED})
      for name, breaks in (
          ("by_a_getter", "Object.defineProperty(Object.prototype, 'cachedDataRejected', "
                          "{ get() { throw new Error('x'); }, configurable: true });"),
          ("by_v8_s_flags", "const word = /^\\p{L}+$/v;\n"
                            "require('v8').setFlagsFromString('--no-harmony-regexp-unicode-sets');"))),
    # ... or hidden from it as an HTML close comment (`-->` at a line's start) once the harness
    # took `.target` out after a `new` at a line comment's end
    ("js_returns_after_an_html_close_comment", "javascript",
     "function f(x) { return x; }\nconst obj = { target: 0 };\nobj // new\n.target --> 1; "
     "return;\nrequire('node:assert').deepEqual(f(1), 2);\n", {FAILED}),
    # ... hidden from the harness's reading by a `new` at a line comment's end and `.target`
    # on the next line (the harness made them one line, the return part of the comment)
    ("js_returns_after_a_new_target_split_by_a_comment", "javascript",
     "function add(x, y) { return x - y; }\nconst o = { target: 1 };\n"
     "const unused = o // new\n.target; return;\n"
     "require('node:assert').deepEqual(add(1, 2), 3);\n", {FAILED}),
    ("js_returns_before_the_tests", "javascript",
     "return;\nconst assert = require('node:assert');\nassert.strictEqual(1, 2);\n", {FAILED}),
    # ... with an 'exit' listener of its own first (as node's module runner adds for a module)
    ("js_listens_for_exit_and_returns", "javascript",
     "process.on('exit', () => {});\nreturn;\nrequire('node:assert').strictEqual(1, 2);\n",
     {FAILED}),
    # new.target at a CommonJS module's top level, which a script cannot hold, is no return
    ("js_new_target_at_the_top_level", "javascript",
     "const assert = require('node:assert');\nassert.strictEqual(new.target, undefined);\n",
     {PASSED}),
    ("js_module_awaits_its_tests", "javascript",
     "import assert from 'node:assert';\nawait new Promise((done) => setTimeout(done, 50));\n"
     "assert.strictEqual(1 + 1, 2);\n", {PASSED}),
    # an annotation among the tests' main's modifiers, so that a harness that stops reading
    # modifiers there runs an earlier main, which passes
    ("java_annotated_main_hides_behind_an_earlier_one", "java",
     "class Helper { public static void main(String[] a) { } }\nclass Problem {\n"
     "  public @SuppressWarnings(\"unused\") static void main(String[] a) {\n"
     "    throw new AssertionError(\"the tests failed\");\n  }\n}\n", {FAILED}),
    # a class javac names E$1$Inner, which a harness naming it E$Inner would swap for this one
    ("java_main_in_an_enum_constant_body", "java",
     "class E$Inner { public static void main(String[] a) { } }\nenum E { A {\n"
     "  class Inner { public static void main(String[] a) { throw new AssertionError(); } }\n"
     "} }\n", {SYNTAX_ERROR}),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_program(sandbox: Sandbox, run: Run, untouched: Check,
                         case: tuple[Any, ...]) -> None:
    _, language, source, allowed, *limits = case
    if not limits and TIMEOUT not in allowed:  # (one that ends: its time on a loaded machine
        limits = [SLOW]  # is no part of its verdict)
    result = run(sandbox, language, source, *limits)
    assert result.outcome in allowed, result
    untouched(sandbox)


def test_the_report_key_makes_no_syntax_error(sandbox: Sandbox, run: Run,
                                              untouched: Check) -> None:
    """A Python program that finds the report key (its harness's frame holds it) and sends
    ``S`` with it, as its harness says that a program does not compile, still fails: that
    report counts only with the pass token after it, which the harness sends before any of the
    program's code could run (red team: it read as a syntax error). Its error is its assertion,
    so it did find the key (else a LookupError)."""
    result = run(sandbox, "python", FORGES_A_SYNTAX_ERROR_WITH_THE_KEY)
    assert result.outcome == FAILED, result
    assert result.error.endswith("AssertionError\n"), result
    untouched(sandbox)


def test_rebound_exceptions_do_not_change_what_the_harness_catches(
        sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """The harness catches the exceptions it bound at its start, not what ``builtins`` holds
    when the program ends: the program's own error is its text, with no frame of the harness's
    (whose files are the sandbox's own paths)."""
    result = run(sandbox, "python",
                 "import builtins\nclass Other:\n    pass\nbuiltins.BaseException = "
                 "builtins.SystemExit = builtins.MemoryError = builtins.Exception = Other\n"
                 "assert 1 == 2\n")
    assert result.outcome == FAILED, result
    assert result.error.endswith("AssertionError\n") and "launcher" not in result.error, result
    untouched(sandbox)


#: Candidates that rebind what their harness runs on, each with a wrong ``add``: the globals of
#: ``launcher`` (which a frame below the program's leads to, as does ``gc`` once it unfreezes
#: what the fork server froze) and, from Python 3.13 on (PEP 667: ``frame.f_locals`` writes
#: through; before, a snapshot), the locals of the harness's frame. Each makes what runs the
#: tests, reports a failure or marks its kind a no-op, points addresses at the pass token and
#: makes the child's end a wait, while a thread of its own ends the process with status 0 once
#: the harness has sent what it sends.
REBINDS_PRELUDE = """
import gc, os, sys, threading, time
def add(a, b):
    return a - b
class Other(Exception):
    pass
def wait(*args):
    time.sleep(3)
def end():
    time.sleep(1)
    os._exit(0)
threading.Thread(target=end, daemon=True).start()
try:
    raise ValueError
except ValueError as error:  # (a frame of the harness's, with no sys._getframe)
    harness = error.__traceback__.tb_frame.f_back
"""
REBINDS = {
    "globals": """
def rebind(names):
    names["run_code"] = names["_forkloop"] = names["_report"] = lambda *args: None
    names["_REPORT_AT"] = names["_TOKEN_AT"]
    names["_exit"] = wait
rebind(harness.f_globals)
gc.unfreeze()
for found in gc.get_objects():
    if type(found) is type(add) and found.__name__ == "_python_main":
        rebind(found.__globals__)
""",
    "locals": """
for name, value in list(harness.f_locals.items()):
    if callable(value) and ("end" in name or "exit" in name):
        harness.f_locals[name] = wait
    elif callable(value) and (value is exec or type(value) is type(add) or name == "mark"):
        harness.f_locals[name] = lambda *args: None  # (not what writes: it is to send)
    elif isinstance(value, (bytes, tuple)):
        harness.f_locals[name] = type(value)()
    elif isinstance(value, int) and value > 1 << 20:  # an address: the pass token's
        harness.f_locals[name] = harness.f_globals["_TOKEN_AT"]
""",
    # the exception classes it catches: the failure escapes into the fork server's code
    "exceptions": """
for names in (harness.f_globals, harness.f_locals):
    for name, value in list(names.items()):
        if isinstance(value, type) and issubclass(value, BaseException):
            names[name] = Other
""",
}
REBINDS_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n\ncheck(add)\n"


@pytest.mark.parametrize("what", list(REBINDS))
def test_a_candidate_that_rebinds_its_harness_still_fails(sandbox: Sandbox, untouched: Check,
                                                          what: str) -> None:
    """The token follows only tests that returned, from code loaded before the program ran,
    and a failure is reported with no address the program can reach: rebinding the harness's
    globals, or its frame's locals, turns a failure into no pass, whether the tests run as a
    tail compiled apart or with the rest; and the same candidate with a right ``add`` passes."""
    head = REBINDS_PRELUDE + REBINDS[what]
    source = head + REBINDS_TESTS
    limits = Limits(timeout_s=5.0)
    results = sandbox.run([Program("python", source, limits, tail_at=len(head)),
                           Program("python", source, limits),
                           Program("python", source.replace("a - b", "a + b"), limits)])
    assert [r.outcome for r in results] == [FAILED, FAILED, PASSED], results
    if what != "locals" or sys.version_info < (3, 13):  # (there, it made its error text go)
        assert "assert candidate(2, 3) == 5" in results[0].error, results[0]
    untouched(sandbox)


#: What a program finds in the files at the top level of the file system (their first bytes,
#: or the error opening them): the host's own are covered, as its folders are.
TOP_LEVEL_FILES = """
import os
found = {}
for name in os.listdir("/"):
    path = os.path.join("/", name)
    if not os.path.islink(path) and not os.path.isdir(path):
        try:
            with open(path, "rb") as handle:
                found[name] = handle.read(64)
        except OSError as error:
            found[name] = error.errno
assert "hybridmetric-hostile-secret" in found and set(found.values()) == {b""}, found
"""


@pytest.mark.skipif(os.getuid() != 0, reason="makes a file at the top level of the file system")
def test_the_host_s_top_level_files_read_empty(untouched: Check) -> None:
    """A file the host keeps at ``/`` (a ``/.env``, a container's descriptor) is covered with
    an empty read-only one, as the host's own folders are with empty ones."""
    secret = Path("/hybridmetric-hostile-secret")
    secret.write_text("the host's secret\n")
    try:
        with Sandbox(workers=1) as box:  # (after the file: what comes later stays in view)
            [result] = box.run([Program("python", TOP_LEVEL_FILES, Limits(timeout_s=5.0))])
            assert result.outcome == PASSED, result
            untouched(box)
    finally:
        secret.unlink()


def test_system_v_shared_memory_is_capped(sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """Segments that no process maps count toward no limit of a process's (nor, after a
    program, do they stay: the sweep removes them): the worker's IPC namespace holds them all to
    1 GiB, under a memory limit that would allow more."""
    if "System V shared memory limit" in " ".join(sandbox._workers[0].problems):
        pytest.skip("this kernel does not let the worker set its IPC namespace's limits")
    result = run(sandbox, "python", DETACHED_SEGMENTS, Limits(timeout_s=20.0, memory_mb=4096))
    assert result.outcome == FAILED, result
    assert "segment 20: errno 28" in result.error  # ENOSPC: 20 segments of 50 MiB fill 1 GiB
    untouched(sandbox)


def test_escaped_grandchild_is_hunted(sandbox: Sandbox, run: Run, untouched: Check) -> None:
    result = run(sandbox, "python", ESCAPE)
    assert result.outcome == PASSED
    assert result.escaped >= 1  # the setsid grandchild outlived its program and was killed
    untouched(sandbox)


CLONE_PARENT = f"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0)  # clone(CLONE_PARENT | SIGCHLD), x86-64
if pid == 0:  # a sibling of the program: a child of whatever forked it
    libc.prctl(15, NAME, 0, 0, 0)  # PR_SET_NAME
    time.sleep(60)
    open("/tmp/{MARK}_sibling", "w").write("escaped")
    os._exit(0)
assert pid > 0, ctypes.get_errno()
time.sleep(0.2)  # (the sibling has its name)
"""


@pytest.mark.parametrize("name", [b"sibling", b"TracerPid:x"])
def test_a_sibling_made_with_clone_parent_is_hunted(name: bytes, sandbox: Sandbox, run: Run,
                                                    untouched: Check) -> None:
    """clone(CLONE_PARENT) makes the new process a child of the program's parent (the fork
    server), not of the program: it is found and killed all the same, whatever it calls
    itself (a thread name that looks like the status line its tracer is read from once made
    the fork server fail: a sandbox error, which stops a whole scoring run)."""
    if os.uname().machine != "x86_64":
        pytest.skip("the clone system call number in the program is x86-64's")
    result = run(sandbox, "python", f"NAME = {name!r}\n" + CLONE_PARENT)
    assert result.outcome == PASSED, result
    assert result.escaped >= 1
    untouched(sandbox)


SLOW_TO_DIE = """
import ctypes, time
libc = ctypes.CDLL(None)
memory = bytearray(512 << 20)
for at in range(0, len(memory), 4096):  # every page, so that each copy of it maps them all
    memory[at] = 1
for _ in range(30):  # siblings made with clone(CLONE_PARENT), each sharing those pages
    if libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0:  # (x86-64)
        time.sleep(60)
"""


def test_siblings_slow_to_die_are_waited_for(sandbox: Sandbox, run: Run,
                                             untouched: Check) -> None:
    """Processes killed with SIGKILL end only once they have unmapped their memory: 30 that
    share 512 MiB take a while, one after another. The fork server waits for them as long as
    they keep ending (it once gave up after 200 rounds, ~0.3 s, and exited: a sandbox error,
    which stops a whole scoring run, whatever the program's tests said)."""
    if os.uname().machine != "x86_64":
        pytest.skip("the clone system call number in the program is x86-64's")
    result = run(sandbox, "python", SLOW_TO_DIE + "assert 1 + 1 == 2\n",
                 Limits(timeout_s=10.0, memory_mb=1024))
    assert result.outcome == PASSED, result
    assert result.escaped == 30
    untouched(sandbox)


def test_big_output_is_capped(sandbox: Sandbox, run: Run) -> None:
    result = run(sandbox, "python", "import sys\nsys.stderr.write('e' * 10**6)\nassert 0\n")
    assert result.outcome == FAILED
    assert len(result.error) < 5000
    assert "AssertionError" in result.error


class HostListener:
    """A listener on the host's 127.0.0.1 (opened here, never anything else, on a free port)
    that records whatever reaches it until it is closed, after the program has ended."""

    def __init__(self, kind: int) -> None:
        self.kind, self.received = kind, []
        self.socket = socket.socket(socket.AF_INET, kind)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        if kind == socket.SOCK_STREAM:
            self.socket.listen(1)
        self.socket.settimeout(0.2)
        self.stop = threading.Event()
        self.watcher = threading.Thread(target=self._watch)
        self.watcher.start()

    def _watch(self) -> None:
        while True:
            stopping = self.stop.is_set()  # one more round once stopped: what waits is read
            try:
                if self.kind == socket.SOCK_STREAM:
                    connection, _ = self.socket.accept()
                    connection.settimeout(5)
                    self.received.append(connection.recv(100))
                    connection.close()
                else:
                    self.received.append(self.socket.recv(100))
            except TimeoutError:
                if stopping:
                    return

    def close(self) -> list[bytes]:
        """What reached the listener."""
        self.stop.set()
        self.watcher.join()
        self.socket.close()
        return self.received


def test_a_return_nested_past_the_harness_s_compile_takes_no_pass(sandbox: Sandbox) -> None:
    """A CommonJS program with a top-level `return` before its (failing) tests, behind an array
    nested so deep that the harness's compile of a copy of it runs out of stack where node's own
    compile, a few frames shallower, does not (with node 20, at 2012 levels): no depth passes.
    (Its one-level window moves with node's version and build; the depths tried surround it
    for node 20.)"""
    programs = [Program("javascript", "function f(x) { return x + 1; }\nconst deep = "
                        + "[" * depth + "]" * depth + ";\nif (true) return;\n"
                        "require('node:assert').deepEqual(f(1), 3);\n", SLOW)
                for depth in range(1990, 2040)]
    results = sandbox.run(programs)
    assert all(result.outcome != PASSED for result in results), [
        (1990 + i, r.outcome) for i, r in enumerate(results) if r.outcome == PASSED]


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM])
def test_cannot_reach_host_loopback(sandbox: Sandbox, run: Run, untouched: Check,
                                    kind: int) -> None:
    """A listener on the host's 127.0.0.1 stays unreached."""
    listener = HostListener(kind)
    source = (
        "import socket\n"
        f"s = socket.socket(socket.AF_INET, {int(kind)})\n"
        f"s.connect(('127.0.0.1', {listener.port}))\n"
        "s.send(b'leaked')\n"
        "assert True\n"
    )
    try:
        result = run(sandbox, "python", source)
    finally:
        received = listener.close()
    assert result.outcome == FAILED
    assert "Permission denied" in result.error or "unreachable" in result.error
    assert received == []
    untouched(sandbox)


#: A TCP connection to the host's 127.0.0.1 at PORT in each compiled or JIT language: each
#: fails (with the error its runtime gives a refused socket) unless it reaches the listener.
CONNECT = {
    "cpp": """#include <arpa/inet.h>
#include <cstdio>
#include <sys/socket.h>
#include <unistd.h>
int main() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) { perror("socket"); return 1; }
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(PORT);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(s, (sockaddr *) &to, sizeof to) != 0) { perror("connect"); return 1; }
    write(s, "leaked", 6);
}
""",
    "javascript": """const s = require("net").connect(PORT, "127.0.0.1", () => s.end("leaked"));
""",
    "java": """import java.net.Socket;
class Problem {
    public static void main(String[] args) throws Exception {
        try (Socket s = new Socket("127.0.0.1", PORT)) {
            s.getOutputStream().write("leaked".getBytes());
        }
    }
}
""",
}


@pytest.mark.parametrize("language", sorted(CONNECT))
def test_no_language_reaches_host_loopback(sandbox: Sandbox, run: Run, untouched: Check,
                                           language: str) -> None:
    """The network wall is the process's, not Python's: a C++, JavaScript or Java program's
    connection to a listener on the host's 127.0.0.1 fails and nothing reaches it."""
    listener = HostListener(socket.SOCK_STREAM)
    try:
        result = run(sandbox, language, CONNECT[language].replace("PORT", str(listener.port)),
                     Limits(timeout_s=20.0))
    finally:
        received = listener.close()
    assert result.outcome == FAILED, result
    assert "ermission denied" in result.error or "EACCES" in result.error, result.error
    assert received == []
    untouched(sandbox)


def test_the_connecting_programs_reach_the_listener_when_the_network_is_allowed(
        run: Run, untouched: Check) -> None:
    """The control of the test above: with ``allow_network`` the same programs pass and their
    bytes arrive (so their failure there is the wall's doing, not a broken program)."""
    with Sandbox(workers=1, allow_network=True) as box:
        if box.isolation.uid is None:
            pytest.skip("needs root (the sandbox's own uid)")
        for language in sorted(CONNECT):
            listener = HostListener(socket.SOCK_STREAM)
            try:
                result = run(box, language,
                             CONNECT[language].replace("PORT", str(listener.port)),
                             Limits(timeout_s=20.0))
            finally:
                received = listener.close()
            assert (language, result.outcome) == (language, PASSED), result
            assert received == [b"leaked"], language
        untouched(box)


def test_no_server_of_the_inspector_opens_where_the_network_is_allowed(run: Run) -> None:
    """Another process of the program's could connect to it, as the program's own threads
    cannot, and end what runs: ``inspector.open`` is closed, and SIGUSR1 (on which node opens
    it) is the harness's."""
    source = ("const assert = require('node:assert');\nconst inspector = require('inspector');\n"
              "assert.throws(() => inspector.open(0, '127.0.0.1'), /closed in the sandbox/);\n"
              "process.kill(process.pid, 'SIGUSR1');\n"
              "setTimeout(() => assert.strictEqual(inspector.url(), undefined), 200);\n")
    with Sandbox(workers=1, allow_network=True) as box:
        result = run(box, "javascript", source, Limits(timeout_s=20.0))
    assert result.outcome == PASSED, result


#: A native addon that a JavaScript program builds with the sandbox's g++ and loads: a thread of
#: its own ends what the main thread runs (V8's TerminateExecution, which drops the microtasks
#: queued, the tests' continuation among them), and a timer of node's event loop lets it run on.
NATIVE_TERMINATION = r"""function add(a, b) { return a + b; }
const fs = require('fs');
fs.writeFileSync('/tmp/x.cc', `
#include <pthread.h>
#include <unistd.h>
#include <uv.h>
namespace v8 { class Isolate { public: static Isolate* GetCurrent(); void TerminateExecution();
                               void CancelTerminateExecution(); }; }
static v8::Isolate* isolate; static uv_timer_t timer;
static void cancel(uv_timer_t* h) {
  isolate->CancelTerminateExecution(); uv_close((uv_handle_t*)h, 0);
}
static void* end(void*) { usleep(300000); isolate->TerminateExecution(); return 0; }
__attribute__((constructor)) static void start() {
  isolate = v8::Isolate::GetCurrent();
  uv_timer_init(uv_default_loop(), &timer); uv_timer_start(&timer, cancel, 0, 0);
  pthread_t thread; pthread_create(&thread, 0, end, 0); pthread_detach(thread);
}`);
require('child_process').execFileSync('g++', ['-shared', '-fPIC', '-I/usr/include/node',
  '/tmp/x.cc', '-o', '/tmp/x.node', '-lpthread', '-Wl,-z,nodelete']);
try { process.dlopen({ exports: {} }, '/tmp/x.node'); } catch (error) {
  if (/closed in the sandbox/.test(error.message)) throw error;
}
Promise.resolve().then(() => { const end = Date.now() + 3000; while (Date.now() < end) {} });
const assert = require('node:assert');
async function test() { await null; assert.strictEqual(add(1, 2), 4); }
test();
"""


@pytest.mark.skipif(shutil.which("g++") is None or not os.path.exists("/usr/include/node/uv.h"),
                    reason="builds a native addon with g++ and node's headers")
def test_a_native_addon_does_not_load(sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """``process.dlopen`` (and so a require of a ``.node`` file) is closed: native code in the
    process reaches V8's own API, which ends what runs as the inspector does."""
    result = run(sandbox, "javascript", NATIVE_TERMINATION, Limits(timeout_s=30.0))
    assert result.outcome == FAILED, result
    assert "loading native code (process.dlopen)" in result.error, result
    untouched(sandbox)


def _gone_as_on_a_kernel_without_it(sandbox: Sandbox, run: Run, call: str,
                                     what: str) -> None:
    """``call`` (Python that sets ``made`` and prints it and the errno) gives ``what`` here,
    outside the sandbox, and ENOSYS inside it, as on a kernel built without it."""
    import subprocess
    import sys

    if os.uname().machine != "x86_64":
        pytest.skip("the system call number in the program is x86-64's")
    here = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True,
                          check=True).stdout.split()
    if int(here[0]) < 0:
        pytest.skip(f"this kernel gives no {what} here either (errno {here[1]})")
    result = run(sandbox, "python", call + "assert made == -1 and "
                 f"ctypes.get_errno() == {errno.ENOSYS}, (made, ctypes.get_errno())\n")
    assert result.outcome == PASSED, result


SYSCALL = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
"""


def test_io_uring_cannot_go_round_the_socket_filter(sandbox: Sandbox, run: Run,
                                                    untouched: Check) -> None:
    """io_uring makes sockets (``IORING_OP_SOCKET``) where seccomp never looks: a program gets
    ENOSYS from it, as on a kernel without it, where this kernel gives it a ring."""
    _gone_as_on_a_kernel_without_it(sandbox, run, SYSCALL + (
        "made = libc.syscall(425, 4, ctypes.create_string_buffer(120))  # io_uring_setup\n"
        "print(made, ctypes.get_errno())\n"), "io_uring")
    untouched(sandbox)


def test_native_aio_contexts_are_not_the_program_s_to_take(sandbox: Sandbox, run: Run,
                                                           untouched: Check) -> None:
    """Native AIO contexts count against one limit of the whole machine's (``fs.aio-max-nr``):
    a program that took them all made ``io_setup`` fail for every process on it, root's too, as
    long as it ran. A program gets ENOSYS, as on a kernel without AIO, where this host gives
    this process one."""
    _gone_as_on_a_kernel_without_it(sandbox, run, SYSCALL + (
        "made = libc.syscall(206, 1, ctypes.byref(ctypes.c_ulong(0)))  # io_setup\n"
        "print(made, ctypes.get_errno())\n"), "AIO context")
    untouched(sandbox)


HUGE_PAGES = """
import ctypes, errno, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
try:
    mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)  # MAP_HUGETLB
    raise AssertionError("a huge page mapping")
except OSError as exc:
    assert exc.errno == errno.ENOSYS, exc
assert libc.shmget(0, 2 << 20, 0o4000 | 0o1000 | 0o600) == -1  # SHM_HUGETLB | IPC_CREAT
assert ctypes.get_errno() == errno.ENOSYS, ctypes.get_errno()
try:
    os.memfd_create("huge", 4)  # MFD_HUGETLB
    raise AssertionError("a huge page memory file")
except OSError as exc:
    assert exc.errno == errno.ENOSYS, exc
"""


def test_huge_pages_are_not_the_program_s_to_take(sandbox: Sandbox, run: Run,
                                                  untouched: Check) -> None:
    """Huge pages come from one pool of the machine's, which no limit of a program's counts: a
    program that mapped its pages made every other process's fail, root's too, where a host
    keeps one. The calls that take them fail as on a kernel without huge pages (ENOSYS),
    whatever the host's pool (none here: they would fail with ENOMEM)."""
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("MAP_HUGETLB in the program is x86-64's and arm64's")
    result = run(sandbox, "python", HUGE_PAGES)
    assert result.outcome == PASSED, result
    untouched(sandbox)


def test_the_host_s_devices_are_out_of_reach(sandbox: Sandbox, run: Run,
                                             untouched: Check) -> None:
    """Programs get a ``/dev`` of their worker's own, read-only: the devices any process may
    use (those the host has), private terminals and shared memory. A device of the host's that
    anyone may open (as ``/dev/kvm`` or ``/dev/fuse`` are on some hosts), the kernel's log and
    the system log's socket are not there, nothing can be added, and the lists of the kernel's
    keys read empty."""
    shown = sorted([*isolation.DEVICE_LINKS, "pts", *(name for name in (*isolation.DEVICES, "shm")
                                                      if os.path.exists(f"/dev/{name}"))])
    device = f"/dev/hybridmetric-test-{os.getpid()}"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(device, 0o666)  # (past the umask)
        result = run(sandbox, "python", f"""
import errno, os
assert sorted(os.listdir('/dev')) == {shown!r}, os.listdir('/dev')
for path in ({device!r}, '/dev/kmsg', '/dev/log'):
    assert not os.path.lexists(path), path
try:
    open('/dev/planted', 'w')
    raise AssertionError('planted')
except OSError as exc:
    assert exc.errno == errno.EROFS, exc
with open('/dev/null', 'w') as null, open('/dev/urandom', 'rb') as urandom:
    assert null.write('x') == 1 and len(urandom.read(8)) == 8
assert os.readlink('/dev/stdout') == '/proc/self/fd/1'
main, side = os.openpty()
os.write(main, b'x\\n')
assert os.read(side, 9) == b'x\\n'
open('/dev/shm/scratch', 'w').write('x')
assert open('/proc/keys').read() == '' == open('/proc/key-users').read()
""")
        assert result.outcome == PASSED, result
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(device)
    untouched(sandbox)


def test_what_programs_need_in_dev_shm_is_there(untouched: Check) -> None:
    """A path programs need below ``/dev/shm`` (a jar of the Java classpath, a virtual
    environment) is bound back into the private one, as below ``/tmp`` (a sandbox 92 with a
    ``/dev`` of its own could not start)."""
    folder = Path(f"/dev/shm/hybridmetric-test-{os.getpid()}")
    folder.mkdir()
    jar = folder / "tuples.jar"
    try:
        jar.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
        with Sandbox(workers=1, java_classpath=[str(jar)]) as box:
            [result] = box.run([Program("python", f"import os\nassert os.listdir('/dev/shm') == "
                                        f"[{folder.name!r}]\nassert open({str(jar)!r}, 'rb')"
                                        ".read(2) == b'PK'\n")])
            assert result.outcome == PASSED, result
            untouched(box)
    finally:
        shutil.rmtree(folder)


def test_a_private_directory_holds_so_many_files(sandbox: Sandbox, run: Run,
                                                untouched: Check) -> None:
    """Empty files cost the kernel memory that only a memory cgroup counts: a private folder
    holds at most :data:`isolation.PRIVATE_FILES` (a program made files without end, red
    team)."""
    result = run(sandbox, "python", f"""
import errno, os
made = 0
try:
    while made <= {isolation.PRIVATE_FILES}:
        os.close(os.open(f'/tmp/{{made}}', os.O_CREAT | os.O_WRONLY))
        made += 1
except OSError as exc:
    assert exc.errno == errno.ENOSPC, exc
assert {isolation.PRIVATE_FILES} - 64 < made < {isolation.PRIVATE_FILES}, made
""", Limits(timeout_s=30.0))
    assert result.outcome == PASSED, result
    untouched(sandbox)


#: A sandbox in a container with a read-only ``/run`` (``docker run --read-only``): PID and
#: mount namespaces of its own, with its own ``/proc``, so that PID 1's ``/run`` is its own. What
#: it said, and what it made in the folders anyone may write.
ON_A_READ_ONLY_RUN = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x00020000 | 0x20000000) == 0  # CLONE_NEWNS | CLONE_NEWPID
child = os.fork()
if child:
    os._exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
assert libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) == 0  # MS_REC | MS_PRIVATE
assert libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0
assert libc.mount(b"tmpfs", b"/run", b"tmpfs", 1, None) == 0  # MS_RDONLY
from hybridmetric.sandbox import Sandbox
open_to_all = ("/tmp", "/dev/shm", "/var/tmp")
before = {folder: sorted(os.listdir(folder)) for folder in open_to_all}
try:
    with Sandbox(workers=1) as box:
        said = ""
except RuntimeError as exc:
    said = str(exc)
print(json.dumps([said, [f for f in open_to_all if sorted(os.listdir(f)) != before[f]]]))
"""


@pytest.mark.skipif(os.getuid() != 0, reason="claiming a uid needs root")
def test_uids_are_claimed_nowhere_anyone_may_write() -> None:
    """Where ``/run`` is read-only, a sandbox refuses to start and says how to fix it: it never
    claims its uids in a folder anyone may write, where a user made two sandboxes claim in two
    places, and take one uid (red team)."""
    import subprocess

    said, changed = json.loads(subprocess.run(
        [sys.executable, "-c", ON_A_READ_ONLY_RUN], capture_output=True, text=True, timeout=120,
        check=True).stdout)
    assert changed == []
    assert "make /run writable for root (in a container: --tmpfs /run" in said, said


TAKES_EVERY_TERMINAL = f"""
import errno, os
held = []
try:
    while True:
        held.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
except OSError as exc:
    assert exc.errno == errno.ENOSPC, exc
assert len(held) == {isolation.TERMINALS}, len(held)
"""


def test_a_program_takes_only_its_worker_s_share_of_terminals(sandbox: Sandbox, run: Run,
                                                              untouched: Check) -> None:
    """Every pseudo-terminal file system but the host's own shares the kernel's 3072 terminals:
    a program's instance holds a few dozen, so that one program cannot leave none to another
    worker's, or to a container on the host (red team)."""
    assert run(sandbox, "python", TAKES_EVERY_TERMINAL).outcome == PASSED
    untouched(sandbox)


def test_a_program_holds_no_lease(sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """A lease makes every other ``open`` of its file wait (up to 45 s): without root, programs
    own the user's files, and one held a lease on a module of the user's, which the user's
    processes and other workers' programs waited to open (red team). The request fails as
    where leases are off."""
    result = run(sandbox, "python", "import errno, fcntl\nwith open('program.py') as own:\n"
                 "    try:\n        fcntl.fcntl(own, fcntl.F_SETLEASE, fcntl.F_RDLCK)\n"
                 "        raise AssertionError('leased')\n    except OSError as exc:\n"
                 "        assert exc.errno == errno.EINVAL, exc\n")
    assert result.outcome == PASSED, result
    untouched(sandbox)


#: Each of ``bpf`` (an array map), ``perf_event_open`` (a counter of the process's own time in
#: user space, as ``perf_event_paranoid`` 2 allows anyone) and ``userfaultfd`` (user-space faults
#: only, as ``vm.unprivileged_userfaultfd`` 0 allows anyone): whether it gave a descriptor, and
#: the errno (the calls' numbers filled in: :func:`_call_number`).
KERNEL_SURFACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def attempt(number, *args):
    ctypes.set_errno(0)
    made = libc.syscall(number, *args)
    if made >= 0:
        os.close(made)
    return made >= 0, ctypes.get_errno()
bpf_map = (ctypes.c_uint32 * 32)(2, 4, 4, 1)  # BPF_MAP_CREATE: an array of one 4-byte value
counter = (ctypes.c_uint64 * 16)()  # perf_event_attr
counter[0] = 1 | (128 << 32)  # type PERF_TYPE_SOFTWARE, size 128
counter[1] = 1  # PERF_COUNT_SW_TASK_CLOCK
counter[5] = (1 << 5) | (1 << 6)  # exclude_kernel, exclude_hv
seen = {{"bpf": attempt({bpf}, 0, ctypes.byref(bpf_map), ctypes.sizeof(bpf_map)),
        "perf_event_open": attempt({perf_event_open}, ctypes.byref(counter), 0, -1, -1, 0),
        "userfaultfd": attempt({userfaultfd}, 1 | os.O_CLOEXEC)}}  # UFFD_USER_MODE_ONLY
print(seen)
"""


def _call_number(name: str) -> int:
    """A system call's number on this machine, as libseccomp (which the sandbox needs) knows it."""
    import ctypes

    return ctypes.CDLL(isolation.SECCOMP_LIBRARY).seccomp_syscall_resolve_name(name.encode())


def test_bpf_performance_counters_and_userfaultfd_are_closed(sandbox: Sandbox, run: Run,
                                                             untouched: Check) -> None:
    """Kernel facilities that exploits lean on fail with ENOSYS, as on a kernel without them,
    whatever the host allows an unprivileged process (here: a counter and a userfaultfd)."""
    numbers = {name: _call_number(name) for name in ("bpf", "perf_event_open", "userfaultfd")}
    closed = {name: (False, errno.ENOSYS) for name in numbers}
    result = run(sandbox, "python", KERNEL_SURFACE.format(**numbers)
                 + f"assert seen == {closed!r}, seen\n")
    assert result.outcome == PASSED, result
    untouched(sandbox)


#: A user namespace, three ways (x86-64 numbers): ``unshare``, ``clone`` and ``clone3`` (its
#: ``struct clone_args``: flags, then exit_signal fifth). A child that one made leaves at once.
#: Prints each call's (result, errno), then makes a thread, a process and a command, which the C
#: library makes with ``clone3`` where it can.
USER_NAMESPACE = """
import ctypes, os, subprocess, threading
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def attempt(call, *args):
    ctypes.set_errno(0)
    made = libc.syscall(call, *args)
    if made == 0 and call != 272:
        os._exit(0)
    error = ctypes.get_errno()
    if made > 0:
        os.waitpid(made, 0)
    return made, error
clone_args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD)
seen = [attempt(272, CLONE_NEWUSER), attempt(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
        attempt(435, ctypes.byref(clone_args), ctypes.sizeof(clone_args))]
print(seen)
thread = threading.Thread(target=sum, args=([1, 2],))
thread.start()
thread.join()
child = os.fork()
if child == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7
subprocess.run(["true"], check=True)
"""


def _unprivileged_user_namespace() -> int:
    """0 where an unprivileged user (an unused uid) may make a user namespace here, else the
    errno (found in a child of the test, which runs as root)."""
    import ctypes

    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgid(60998)
            os.setuid(60998)
            libc = ctypes.CDLL(None, use_errno=True)
            code = 0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


def test_no_user_namespace_is_made(sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """In a user namespace of its own a program would hold every capability (mounts, namespaces
    of any kind, the kernel code that needs them): ``unshare`` and ``clone`` with CLONE_NEWUSER
    fail with EPERM, and ``clone3`` (seccomp cannot read its flags) with ENOSYS, where this
    machine lets an unprivileged user make one; threads, forks and commands still work (the C
    library falls back to ``clone``)."""
    if os.uname().machine != "x86_64":
        pytest.skip("the system call numbers in the program are x86-64's")
    refused = _unprivileged_user_namespace()
    if refused:
        pytest.skip(f"this machine gives an unprivileged user no user namespace: errno {refused}")
    result = run(sandbox, "python", USER_NAMESPACE + "assert seen == [(-1, 1), (-1, 1), "
                 f"(-1, {errno.ENOSYS})], seen\n")
    assert result.outcome == PASSED, result
    untouched(sandbox)


FORKED_MEMORY_BOMB = """
import os, time
children = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (300 * 2**20)  # under the per-process limit, 2.4 GB in all
        time.sleep(5)
        os._exit(0)
    children.append(pid)
assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
"""


def test_forked_memory_bomb_is_held_to_one_limit(sandbox: Sandbox, run: Run,
                                                 untouched: Check) -> None:
    """Each child stays under RLIMIT_DATA; the tree's memory cgroup holds all of them to 512 MB."""
    if not sandbox.isolation.memory_cgroup:
        pytest.skip("no memory cgroup here: memory is limited per process only")
    result = run(sandbox, "python", FORKED_MEMORY_BOMB, SLOW)
    assert result.outcome == MEMORY, result
    untouched(sandbox)


BORN_INSIDE = """
import os
def memory_cgroup(pid):  # cgroup v1's memory hierarchy, else v2's
    with open(f"/proc/{pid}/cgroup") as handle:
        paths = {name: line.split(":", 2)[2].strip() for line in handle
                 for name in line.split(":")[1].split(",")}
    return paths.get("memory", paths.get(""))
with open("/proc/self/oom_score_adj") as handle:
    score = handle.read().strip()
mine, server = memory_cgroup(os.getpid()), memory_cgroup(os.getppid())
assert score == "1000", score
assert os.path.basename(mine).startswith("hybridmetric-") and mine == server, (mine, server)
"""


def test_programs_are_born_in_their_memory_cgroup_as_the_oom_killer_s_first_choice(
        sandbox: Sandbox, run: Run) -> None:
    """The fork server sits in the worker's memory cgroup, so a program starts inside it (it
    does not move in, which would wait for an RCU grace period whenever none passed lately), and
    raises its OOM score above the server's."""
    if not sandbox.isolation.memory_cgroup:
        pytest.skip("no memory cgroup here")
    result = run(sandbox, "python", BORN_INSIDE)
    assert result.outcome == PASSED, result


#: Many processes, each smaller than the fork server, whose OOM scores are lowered back to the
#: server's: together past the memory limit, the OOM killer's largest process is the server.
SMALL_PROCESSES_BOMB = """
import os, time
with open("/proc/self/oom_score_adj", "w") as handle:
    handle.write("0")
children = []
for _ in range(120):
    pid = os.fork()
    if pid == 0:
        block = bytearray(3 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(10)
        os._exit(0)
    children.append(pid)
assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
"""


def test_a_fork_server_the_oom_killer_ends_is_the_program_s_memory(
        sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """A program can make the OOM killer choose its fork server (above): that is ``memory``,
    not a sandbox error, and a fresh worker runs the next program."""
    if not sandbox.isolation.memory_cgroup:
        pytest.skip("no memory cgroup here")
    result = run(sandbox, "python", SMALL_PROCESSES_BOMB, Limits(timeout_s=20.0, memory_mb=128))
    assert result.outcome == MEMORY, result
    untouched(sandbox)


@pytest.mark.parametrize(("address", "error"), [
    (f"\0hybridmetric-hostile-{os.getpid()}", "ConnectionRefusedError"),
    (f"/run/hybridmetric-hostile-{os.getpid()}.sock", "FileNotFoundError"),
    (f"/var/lib/hybridmetric-hostile-{os.getpid()}/mysqld.sock", "FileNotFoundError"),
], ids=["abstract", "run", "var"])
def test_cannot_reach_a_host_unix_socket(address: str, error: str, sandbox: Sandbox, run: Run,
                                         untouched: Check) -> None:
    """Seccomp lets AF_UNIX through. The worker's own network namespace hides the host's
    abstract Unix sockets, its private /run the socket files where the host keeps its services'
    (D-Bus, systemd), and its hidden /var those kept with their data (a MySQL's), even one
    anyone may connect to (a read-only mount does not stop a connection)."""
    folder = os.path.dirname(address)
    made = not address.startswith("\0") and not os.path.isdir(folder)
    if made:
        os.mkdir(folder, 0o777)
        os.chmod(folder, 0o777)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    if not address.startswith("\0"):
        os.chmod(address, 0o777)
    listener.listen(1)
    listener.settimeout(0.1)
    source = ("import socket\ns = socket.socket(socket.AF_UNIX)\n"
              f"s.connect({address!r})\ns.sendall(b'leaked')\n")
    try:
        result = run(sandbox, "python", source)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
        if not address.startswith("\0"):
            os.unlink(address)
        if made:
            os.rmdir(folder)
    assert result.outcome == FAILED and error in result.error, result
    untouched(sandbox)


LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
#: How a program makes (IPC_CREAT | 0600) and looks up a System V object of each kind.
IPC_CALLS = {"shm": ("shmget({key}, 4096, 0o1600)", "shmget({key}, 0, 0)"),
             "sem": ("semget({key}, 1, 0o1600)", "semget({key}, 0, 0)"),
             "msg": ("msgget({key}, 0o1600)", "msgget({key}, 0)")}


@pytest.mark.parametrize("kind", sorted(IPC_CALLS))
def test_system_v_ipc_neither_reaches_the_host_nor_outlives_the_program(
        sandbox: Sandbox, run: Run, untouched: Check, kind: str) -> None:
    """A shared memory segment of the host's that anyone may attach is out of reach (its own IPC
    namespace), and the segments, semaphore sets or message queues a program makes are gone
    before the next program (a channel between programs, and memory that would stay held),
    without the worker having to be replaced."""
    if not sandbox.isolation.ipc_namespace:
        pytest.skip("no IPC namespace here")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x484D0000 + os.getpid() % 0xFFFF
    host = libc.shmget(key, 4096, 0o1666)  # IPC_CREAT | rw for everyone
    assert host >= 0
    make, find = IPC_CALLS[kind]
    workers = [w.process.pid for w in sandbox._workers]
    try:
        sees_host = LIBC + f"assert libc.shmget({key}, 0, 0) == -1, 'host segment reached'\n"
        assert run(sandbox, "python", sees_host).outcome == PASSED
        leaves = LIBC + "".join(f"assert libc.{make.format(key=key + k)} >= 0\n" for k in (1, 2))
        for i in range(4):  # two objects at once, on both workers, twice: not all at index 0
            assert run(sandbox, "python", leaves + f"# {i}\n").outcome == PASSED
        finds = LIBC + "".join(f"assert libc.{find.format(key=key + k)} == -1, '{kind} {k} kept'\n"
                               for k in (1, 2))
        after = sandbox.run([Program("python", finds + f"# {i}\n", Limits(timeout_s=5.0))
                             for i in range(4)])
        assert [r.outcome for r in after] == [PASSED] * 4, after
    finally:
        assert libc.shmctl(host, 0, None) == 0  # IPC_RMID
    assert [w.process.pid for w in sandbox._workers] == workers  # cleared, not replaced
    untouched(sandbox)


def test_posix_message_queues_neither_reach_the_host_nor_outlive_the_program(
        sandbox: Sandbox, run: Run, untouched: Check) -> None:
    """POSIX message queues belong to the IPC namespace too: one the host made is out of reach,
    and one a program makes (a channel to the next program) is gone before the next."""
    if not sandbox.isolation.ipc_namespace:
        pytest.skip("no IPC namespace here")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    host_name, left_name = (f"/hybridmetric-{os.getpid()}-{who}".encode() for who in "hp")
    host = libc.mq_open(host_name, os.O_CREAT | os.O_RDWR, 0o666, None)
    if host < 0 and ctypes.get_errno() == errno.ENOSYS:
        pytest.skip("this kernel has no POSIX message queues")
    assert host >= 0, os.strerror(ctypes.get_errno())
    opens = LIBC + "import os\nq = libc.mq_open({name!r}, {flags}, 0o600, None)\n"
    workers = [w.process.pid for w in sandbox._workers]
    try:
        sees_host = opens.format(name=host_name, flags="os.O_RDONLY") + "assert q == -1, q\n"
        assert run(sandbox, "python", sees_host).outcome == PASSED
        locks = "import contextlib\nwith contextlib.suppress(OSError):\n" \
                f"    os.chmod({isolation.MQUEUE_DIR!r}, 0o555)\n"  # not the worker's to lock
        leaves = opens.format(name=left_name, flags="os.O_CREAT | os.O_RDWR") + locks
        assert run(sandbox, "python", leaves + "assert q >= 0\n").outcome == PASSED
        finds = opens.format(name=left_name, flags="os.O_RDONLY") + "assert q == -1, 'kept'\n"
        after = sandbox.run([Program("python", finds + f"# {i}\n", Limits(timeout_s=5.0))
                             for i in range(4)])  # on both workers
        assert [r.outcome for r in after] == [PASSED] * 4, after
    finally:
        os.close(host)
        assert libc.mq_unlink(host_name) == 0
    assert [w.process.pid for w in sandbox._workers] == workers  # cleared, not replaced
    untouched(sandbox)


#: A program that locks its stdin and makes it non-blocking, which a stdin shared by all the
#: programs of a worker would carry to the next (red team, without root: a correct program that
#: locked /dev/null timed out after it) ...
LOCKS_ITS_STDIN = """
import fcntl, os
fcntl.flock(0, fcntl.LOCK_EX)
os.set_blocking(0, False)
"""
#: ... and one that also leaves in flight, in a Unix socket that carries itself in its own
#: queue, its stdin (with the lock), an unnamed file of 96 MiB in /tmp and the abstract name the
#: socket is bound to, all kept until the kernel's collector runs, which the program's end does
#: not start (the same: files, locks and names outlived the program, and some the sandbox) ...
LEAVES_SOCKETS_IN_FLIGHT = LOCKS_ITS_STDIN + """
import socket
held = os.open('/tmp', os.O_TMPFILE | os.O_RDWR, 0o600)
for _ in range(96):
    os.write(held, b'x' * 2**20)
holder = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
holder.bind('\\0hybridmetric-held')
holder.connect('\\0hybridmetric-held')  # (to itself)
socket.send_fds(holder, [b'.'], [0, held, holder.fileno()])
"""
#: ... and what the next program finds.
FINDS_NOTHING_LEFT = """
import fcntl, os, socket
fcntl.flock(0, fcntl.LOCK_EX | fcntl.LOCK_NB)
assert os.get_blocking(0)
tmp = os.statvfs('/tmp')
assert (tmp.f_blocks - tmp.f_bfree) * tmp.f_frsize < 48 * 2**20, tmp
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind('\\0hybridmetric-held')
"""


def test_what_a_program_leaves_on_its_descriptors_ends_with_it(untouched: Check) -> None:
    """Each program's stdin is its own, and what one left in flight is freed before the next."""
    programs = [LOCKS_ITS_STDIN, FINDS_NOTHING_LEFT + "# 1\n", LEAVES_SOCKETS_IN_FLIGHT,
                FINDS_NOTHING_LEFT + "# 2\n"]
    with Sandbox(workers=1) as box:
        if not box.isolation.network_namespace:
            pytest.skip("no network namespace here, where the worker lists the sockets left")
        worker = box._workers[0].process.pid
        results = box.run([Program("python", source, Limits(timeout_s=10.0, file_mb=128))
                           for source in programs])
        assert [r.outcome for r in results] == [PASSED] * 4, results
        assert box._workers[0].process.pid == worker  # freed, not replaced
        untouched(box)


#: What a program's memory cgroup holds but the page cache, in MiB (the assertion's message) ...
CHARGED = """
lines = open('/proc/self/cgroup').read().splitlines()
v1 = [line.split(':', 2)[2] for line in lines if ':memory:' in line]
folder = ('/sys/fs/cgroup/memory' + v1[0] if v1 else '/sys/fs/cgroup' + lines[0].split(':', 2)[2])
usage = int(open(folder + ('/memory.usage_in_bytes' if v1 else '/memory.current')).read())
stat = dict(line.split() for line in open(folder + '/memory.stat'))
assert False, (usage - int(stat['cache' if v1 else 'file'])) >> 20
"""
#: ... after it looked up 400,000 names that are not there, whose entries in the kernel's cache
#: of names are charged to it and outlive it (red team: 500 MiB of them made a correct program
#: near its memory and time limits time out after).
LOOKS_UP_MISSING_NAMES = """
import os
tag = os.urandom(6).hex()
for i in range(400000):
    try:
        os.stat(f'/usr/share/hybridmetric-missing-{tag}-{i}-' + 'x' * 32)
    except OSError:
        pass
""" + CHARGED


def test_what_a_program_left_charged_to_the_memory_cgroup_is_taken_back(
        untouched: Check) -> None:
    with Sandbox(workers=1) as box:
        if not box.isolation.memory_cgroup:
            pytest.skip("no memory cgroup here")
        worker = box._workers[0].process.pid
        looks, after = box.run([Program("python", LOOKS_UP_MISSING_NAMES, Limits(timeout_s=60.0)),
                                Program("python", CHARGED, Limits(timeout_s=10.0))])
        charged = [int(result.error.rsplit("AssertionError: ", 1)[1]) for result in (looks, after)]
        if charged[0] < 2 * cgroup.LEFTOVER_MB:
            pytest.skip(f"the kernel kept no more than {charged[0]} MiB of those names here")
        # (what may be kept, and the program's own)
        assert charged[1] < cgroup.leftover_room() // 2**20 + 16, charged
        assert box._workers[0].process.pid == worker
        untouched(box)


@pytest.mark.skipif(not shutil.which("javac"), reason="no JDK here")
def test_the_compile_server_s_own_socket_is_none_a_program_left(untouched: Check) -> None:
    """The Java compile server's JVM holds a socket of its own in the worker's network
    namespace, as the programs run: not one they left (sandbox 89 took it for one, and retired
    the worker after every Java program)."""
    java = "class Problem {\n  public static void main(String[] a) {}\n}\n"
    with Sandbox(workers=1) as box:
        worker = box._workers[0].process.pid
        results = box.run([Program("java", java + "// 1\n", Limits(timeout_s=30.0)),
                           Program("python", LEAVES_SOCKETS_IN_FLIGHT, Limits(timeout_s=10.0,
                                                                              file_mb=128)),
                           Program("java", java + "// 2\n", Limits(timeout_s=30.0))])
        assert [r.outcome for r in results] == [PASSED] * 3, results
        assert box._workers[0].process.pid == worker
        untouched(box)


def test_a_preload_s_own_socket_is_none_a_program_left(untouched: Check) -> None:
    """A preloaded module that holds a socket from its import on (a client of some service)
    holds it in the fork server, in the worker's network namespace, before any program runs:
    the sweep after the first program counts down to it, not to zero (sandbox 90 took it for
    one a program left, and retired the worker after its first program). The module goes where
    the workers' interpreter imports from (its own import path: the caller's is not theirs)."""
    name = f"hybridmetric_test_preload_{os.getpid()}"
    module = Path(sysconfig.get_paths()["purelib"]) / f"{name}.py"
    if not os.access(module.parent, os.W_OK):
        pytest.skip(f"the workers' interpreter imports from {module.parent}, which is read-only")
    module.write_text("import socket\nHELD = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n")
    try:
        with Sandbox(workers=1, preload=[name]) as box:
            worker = box._workers[0].process.pid
            results = box.run([Program("python", f"import {name}\nassert {name}.HELD\n# {i}\n",
                                       Limits(timeout_s=10.0)) for i in range(3)])
            assert [r.outcome for r in results] == [PASSED] * 3, results
            assert box._workers[0].process.pid == worker
            untouched(box)
    finally:
        module.unlink()


DEEP_TREE = """
import os
for top in ('.', '/tmp'):
    os.chdir(top)
    for _ in range(1200):  # deeper than shutil.rmtree's recursion reaches
        os.mkdir('d')
        os.chdir('d')
"""


def test_a_tree_too_deep_to_remove_retires_the_worker(sandbox: Sandbox, run: Run,
                                                      untouched: Check) -> None:
    """The program keeps its verdict; its worker, which cannot clear the tree, is replaced
    (its private mounts go with it), so the next program starts clean."""
    assert run(sandbox, "python", DEEP_TREE).outcome == PASSED
    clean = ("import os\nassert os.listdir('.') == ['program.py']\n"
             "assert os.listdir('/var/tmp') == []\n")
    after = sandbox.run([Program("python", clean + f"# {i}\n", Limits(timeout_s=5.0))
                         for i in range(4)])  # on both workers
    assert [r.outcome for r in after] == [PASSED] * 4, after
    untouched(sandbox)


#: A sandbox started in network and mount namespaces of its own (``unshare -mn``, a job
#: runner's): the uids it claims, while the test's sandbox holds its own, from which its search
#: starts, at its first slot (where a sandbox that did not see the test's claims takes them).
IN_OTHER_NAMESPACES = """
import ctypes, json, sys
assert ctypes.CDLL(None).unshare(0x40000000 | 0x00020000) == 0  # CLONE_NEWNET | CLONE_NEWNS
from hybridmetric.sandbox import Sandbox, pool
pool.UID_BASE, pool._first_slot = int(sys.argv[1]), lambda: 0
with Sandbox(workers=2) as box:
    print(json.dumps(box.uids))
"""


def test_a_sandbox_in_other_namespaces_claims_other_uids(sandbox: Sandbox) -> None:
    """Two sandboxes on one machine never share a uid, where one sits in network and mount
    namespaces of its own: they took the same uid (each claimed by an abstract socket's name,
    which the other's network namespace does not show), and with it the same memory cgroup,
    and each took the other's OOM kills for its own program's (red team)."""
    import subprocess

    theirs = subprocess.run([sys.executable, "-c", IN_OTHER_NAMESPACES, str(min(sandbox.uids))],
                            capture_output=True, text=True, timeout=120, check=True).stdout
    assert len(set(json.loads(theirs)) | set(sandbox.uids)) == 4, (theirs, sandbox.uids)


@pytest.mark.skipif(os.getuid() != 0, reason="claiming a uid needs root")
def test_a_uid_that_runs_a_process_or_names_an_account_is_not_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A uid in the sandbox's range that runs a process here (its owner could trace the
    programs), or that the user database names, is passed over, as is a uid whose compile
    server's uid does (a user could once have the sandbox take the user's own uid)."""
    import pwd
    import subprocess

    from hybridmetric.sandbox import pool

    uid, claim = pool._claim_uid()  # the uid the next sandbox would take
    os.close(claim)

    def later(slots: int) -> int:  # the uid that many slots after it (the search wraps)
        return pool.UID_BASE + (uid - pool.UID_BASE + slots) % pool.UID_SLOTS

    looked_up = pwd.getpwuid
    monkeypatch.setattr(pwd, "getpwuid", lambda number: looked_up(0 if number == later(2)
                                                                  else number))
    running = [subprocess.Popen(["sleep", "60"], user=user)
               for user in (uid, later(1) + pool.UID_OFFSET)]
    try:
        with Sandbox(workers=1) as box:
            assert box.uids == [later(3)], (uid, box.uids)
    finally:
        for process in running:
            process.kill()
            process.wait()


def test_parent_environment_does_not_leak(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox,
                                          run: Run, untouched: Check) -> None:
    secret = "hm-secret-7f3a9c"
    monkeypatch.setenv("HM_TEST_SECRET", secret)
    source = (
        "import os, glob\n"
        f"assert not any('{secret}' in v for v in os.environ.values()), 'env'\n"
        "for path in glob.glob('/proc/*/environ'):\n"
        "    try:\n"
        "        data = open(path, 'rb').read()\n"
        "    except OSError:\n"
        "        continue\n"
        f"    assert b'{secret}' not in data, path\n"
        "assert True\n"
    )
    with Sandbox(workers=1) as box:
        result = run(box, "python", source)
        assert result.outcome == PASSED, result
        untouched(box)


def test_reading_a_file_changes_no_access_time(sandbox: Sandbox, run: Run,
                                              untouched: Check) -> None:
    """Every mount programs see is ``noatime`` (as root): a program cannot mark the files the
    next one (or the host) reads the access times of."""
    if sandbox.isolation.uid is None:
        pytest.skip("without root the host's mounts keep their own access-time setting")
    source = ("mounts = [line.split() for line in open('/proc/self/mountinfo')]\n"
              "points = {fields[4]: fields[5] for fields in mounts}\n"
              "assert {'/', '/tmp', '/var/tmp'} <= set(points), points\n"
              "assert all('noatime' in points[p].split(',') for p in ('/', '/tmp', "
              "'/var/tmp')), points\n")
    result = run(sandbox, "python", source)
    assert result.outcome == PASSED, result
    untouched(sandbox)


def test_the_host_s_own_folders_are_hidden(sandbox: Sandbox, run: Run,
                                           untouched: Check) -> None:
    """As root, a top-level folder that is not the system's (a benchmark's data, another user's
    files, the sandbox's own source, /var) is an empty read-only folder to programs, but for the
    paths they run on (this Python, its packages), which stay in view, and the private
    /var/tmp."""
    top = Path(f"/hybridmetric-test-hidden-{os.getpid()}")
    top.mkdir(mode=0o755)
    try:
        (top / "solutions.txt").write_text("the canonical solution\n")
        (top / "solutions.txt").chmod(0o644)
        with Sandbox(workers=1) as box:  # (the folder exists before its worker starts)
            if box.isolation.uid is None:
                pytest.skip("programs are hidden the host's folders as root only")
            seen = run(box, "python", f"print(open({str(top / 'solutions.txt')!r}).read())\n")
            listed = run(box, "python",
                         f"import os, sys\nassert os.listdir({str(top)!r}) == []\n"
                         f"assert os.path.isfile(sys.executable) and os.access({str(top)!r}, "
                         "os.R_OK) and not os.access('/root', os.W_OK)\nimport json, decimal\n"
                         # /var too, but for its private /var/tmp (the test's Python is not there)
                         "assert os.listdir('/var') == ['tmp'], os.listdir('/var')\n"
                         "open('/var/tmp/note', 'w').write('mine')\n")
            untouched(box)
    finally:
        (top / "solutions.txt").unlink()
        top.rmdir()
    assert seen.outcome == FAILED and "FileNotFoundError" in seen.error, seen
    assert listed.outcome == PASSED, listed


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def _worker_and_fork_server(box: Sandbox) -> tuple[int, int]:
    """The pid of the one worker's outer process (the pool's child), and of its fork server."""
    if box.isolation.uid is None:
        pytest.skip("without root the worker forks its programs itself")
    outside = box._workers[0].process.pid
    [worker] = _children(outside)
    [server] = [pid for pid in _children(worker)
                if Path(f"/proc/{pid}/cmdline").read_bytes().endswith(b"_boot.py\0serve\0")]
    return outside, server


def test_a_fork_server_that_dies_retires_its_worker(untouched: Check) -> None:
    """Killed while its program runs, the fork server takes that program's verdict with it
    (a sandbox error, never a pass); the program is killed, and a fresh worker runs the next."""
    with Sandbox(workers=1) as box:
        _, server = _worker_and_fork_server(box)

        def kill_server_once_the_program_runs() -> None:
            for _ in range(500):
                if _children(server):
                    os.kill(server, 9)
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_server_once_the_program_runs)
        killer.start()
        [result] = box.run([Program("python", "import time\ntime.sleep(30)\nassert True\n",
                                    Limits(timeout_s=60.0))])
        killer.join()
        assert result.outcome == SANDBOX_ERROR, result
        assert "fork server" in result.error
        untouched(box)  # no process of its uid left, and the replaced worker passes a program


def test_a_fork_server_that_died_between_programs_costs_no_verdict(untouched: Check) -> None:
    """Killed while idle (from outside, or by the OOM killer as a program's last processes
    outgrew its cgroup), the fork server runs no program: a fresh worker runs the next one."""
    with Sandbox(workers=1) as box:
        outside, server = _worker_and_fork_server(box)
        os.kill(server, 9)
        status = Path(f"/proc/{server}/stat")  # (a zombie: its worker reaps it at the sweep)
        for _ in range(500):  # until it has died
            if status.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.01)
        [result] = box.run([Program("python", "assert 1 + 1 == 2\n")])
        assert result.outcome == PASSED, result
        assert box._workers[0].process.pid != outside
        untouched(box)


#: Reads the process's own writable memory for a marker (``zqx-`` or ``zqy-`` and 32 hex
#: digits) whose SHA-256 is one of ``{hashes}``; one planted here first shows the search works.
MEMORY_SEARCH = """
import hashlib, re
planted = "zq" + "x-" + "{planted}"
wanted, found = {hashes} | {{hashlib.sha256(b"{planted}").hexdigest()}}, set()
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as memory:
    for line in maps:
        fields = line.split()
        if not fields[1].startswith("rw"):
            continue
        start, end = (int(at, 16) for at in fields[0].split("-"))
        memory.seek(start)
        try:
            data = memory.read(end - start)
        except OSError:
            continue
        for match in re.finditer(rb"zq[xy]-([0-9a-f]{{32}})", data):
            digest = hashlib.sha256(match.group(1)).hexdigest()
            if digest in wanted:
                found.add(digest)
assert found == {{hashlib.sha256(b"{planted}").hexdigest()}}, found
"""


def test_a_program_finds_no_trace_of_the_ones_before_in_its_memory(untouched: Check) -> None:
    """The process that forks programs keeps nothing of one that a later one could read in its
    own memory (``/proc/self/mem``): neither its source nor what it printed. A short program
    first (the first request, whose buffer a larger one replaces), then a long one (its
    request's end lies beyond the next one's), then the search."""
    marks = [os.urandom(16).hex() for _ in range(4)]
    planted = os.urandom(16).hex()

    def program(source_mark: str, output_mark: str, padding: int) -> str:
        return (f"print('zq' + 'y-' + {output_mark!r})\n" + "# padding\n" * padding
                + f"# zqx-{source_mark}\nassert True\n")

    hashes = {hashlib.sha256(mark.encode()).hexdigest() for mark in marks}
    with Sandbox(workers=1) as box:
        results = box.run([Program("python", program(marks[0], marks[1], 0), SLOW),
                           Program("python", program(marks[2], marks[3], 120_000), SLOW),
                           Program("python", MEMORY_SEARCH.format(planted=planted, hashes=hashes),
                                   SLOW)])
        assert [result.outcome for result in results] == [PASSED] * 3, results
        untouched(box)
