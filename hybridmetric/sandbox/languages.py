"""How each language is built, run and told to emit the completion token.

A program passes only if a per-run secret token reaches the sandbox on fd 4 after the test code
has finished. The token is not in the source, the environment or the arguments: it waits on fd 3,
and each language's harness takes it from there (and closes fd 3, or leaves it empty) before any
code of the program's runs, then sends it once the tests are done: a module node loads before
the program (JavaScript, ``--require``), a function in the executable's ``.preinit_array`` and
another that the linker puts between the C runtime and the test's ``main`` (C++: ``--wrap=main``,
from an object file built once per worker, which the program's macros do not reach; ``main``
keeps its own meaning, falling off its end returns 0, and a nonzero status is a failure), or a
wrapper class that calls the test's ``main`` (Java). Python runs inside the fork server, whose
harness does the same around ``exec`` (see ``launcher.py``). ``exit(0)``, ``process.exit(0)``,
``System.exit(0)`` or a crash before the end therefore never emit it, and a program cannot read
it from fd 3 and send it early.

A program written to attack this harness on purpose can still fake a pass, by digging the token
out of the harness's own memory (in Python, the interpreter's frames; elsewhere, the process's
memory) or, in JavaScript, by having node call back code of its own as though it had nothing
left to run, or by hiding an error from the harness (node tells it through ``process.emit`` and
the listeners of ``process``, which the program can replace): code cannot hide a secret from the
process it runs in. That is deliberate sabotage,
not a property of ordinary generated code.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import re
import shutil
import string
import struct
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

LANGUAGES = ("python", "javascript", "cpp", "java")
ALIASES = {"py": "python", "js": "javascript", "c++": "cpp", "cxx": "cpp"}
#: The jars MultiPL-E's Java harness puts on the classpath (Debian: libjavatuples-java).
DEFAULT_JAVA_CLASSPATH = ("/usr/share/java/javatuples.jar",)
#: Extra RLIMIT_DATA for managed runtimes on top of their heap limit (JIT, metaspace, threads).
RUNTIME_OVERHEAD_MB = {"javascript": 512, "java": 1024}

#: The C++ standard programs compile under unless told otherwise: MultiPL-E's.
CPP_STANDARD = "c++17"
#: What ``-std=`` may name (g++'s spellings; whether this g++ knows one, g++ says).
_CPP_STANDARD = re.compile(r"(?:c|gnu)\+\+(?:98|03|0x|11|1y|14|1z|17|2a|20|2b|23|2c|26)")
PCH_NAME = "hybridmetric_stdcxx.h"
CPP_MAIN = "hybridmetric_main"
#: ``#include <bits/stdc++.h>`` on a line of its own (a comment may follow).
_STDCXX = re.compile(r"#[ \t]*include[ \t]*<bits/stdc\+\+\.h>[ \t]*(?://[^\n]*)?(?:\n|$)")
#: What may come before it for the precompiled copy to stand in for it: blank space, comments
#: and ``#include`` of other standard headers, which <bits/stdc++.h> includes anyway.
_PREAMBLE = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|#[ \t]*include[ \t]*<([^>\n]*)>[ \t]*"
                       r"(?://[^\n]*)?(?=\n|$)", re.DOTALL)
#: The line ends g++ reads besides LF.
_LINE_ENDS = re.compile(r"\r\n?")
#: The C library's standard headers (the C++ library's have no ``.h``); <bits/stdc++.h> includes
#: their C++ forms. Any other header before it (``<unistd.h>``, a library's) could need or
#: change what the program sees first.
_C_HEADERS = frozenset(f"{name}.h" for name in (
    "assert", "complex", "ctype", "errno", "fenv", "float", "inttypes", "iso646", "limits",
    "locale", "math", "setjmp", "signal", "stdalign", "stdarg", "stdbool", "stddef", "stdint",
    "stdio", "stdlib", "string", "tgmath", "time", "uchar", "wchar", "wctype"))

#: The module node loads before a JavaScript program (``--require``): it takes the token from fd 3
#: and closes it before the program runs, and sends it at node's own ``exit``, once node's own
#: ``beforeExit`` said that nothing was left to run, so asynchronous tests end first, and those a
#: ``beforeExit`` listener of the program's starts too; ``process.exit``, or an error or rejection
#: that nothing caught, ends node without it. An error nothing caught stops the module's code (or
#: the callback) where it was thrown, before the tests end, even where the program's own
#: ``uncaughtException`` handler, domain or capture callback keeps node going: node tells the
#: preload first (``process._fatalException``, the preload's, which calls node's), and no token goes
#: out (or, after it went out, a report ``E`` with the report key takes it back); a rejection
#: nothing handled is such an error too (``--unhandled-rejections=strict``), whatever
#: ``unhandledRejection`` handler the program has. (A promise that never settles is no work to node:
#: it ends the program as it would anyway, token and all; but for an ES module's top-level ``await``
#: of one, after which the module's code never ran: node's module runner then ends node with status
#: 13 where the program set no ``process.exitCode``, and the preload, which tells an ES module from
#: its source before it runs (no CommonJS function body), sends the token only once the module's
#: import settles, unless the program registered loader hooks; and for a CommonJS module's top-level
#: ``return``, which ends it before the tests: a source that a script cannot hold sends none.) Nor
#: does a ``beforeExit`` emitted while node still has a timer, an immediate or I/O waiting
#: (``process.getActiveResourcesInfo``): node says it only once none is left. An ArrayBuffer node
#: could not allocate, a WebAssembly memory V8 could not make or grow, or a worker thread whose heap
#: ran out, nothing caught, is the program's memory: the monitor reports ``M`` with the report key
#: (a program that prints node's words for it itself fails; one that throws a RangeError with them,
#: or makes its error pass for one, gets ``memory``, as Python's ``raise MemoryError`` does: never a
#: pass). What it sends the token with it holds from before the program runs, which can replace none
#: of it; and it sends nothing when the event comes from the program's own code (``process.emit``),
#: not from node (told in a V8 context of its own, which the program's ``Error`` cannot reach), but
#: waits for the next. It is a file of the worker's own (:data:`JS_PRELOAD_FILE`), out of the
#: program's working directory, which holds ``program.js`` alone and is named ``node_modules``
#: (see the Worker wrapper: node finds the preload of a worker thread from there).
JS_PRELOAD_FILE = "hybridmetric_token.js"
JS_PRELOAD_SOURCE = """"use strict";
// (the process object, whatever the program later makes of the global that names it)
const process = globalThis.process;
// The options node runs the program with are the harness's: out of process.execArgv, which is
// then [] as under `node program.js`, so a process the program starts with them
// (child_process.fork passes them on) runs without the harness, and a worker thread given them
// starts (node refuses a worker some process-wide options)
{
  // (a worker thread given options of its own gets the harness's three first: those alone go)
  const own = ["--require", __filename, "--unhandled-rejections=strict"], given = process.execArgv;
  given.splice(0, own.every((option, at) => given[at] === option) ? own.length : given.length);
}
// Node preloads it in each worker thread too, where fd 3 is long closed, and in any process
// the program starts with it named, where fd 3 may be anything (the channel to its parent, for
// child_process.fork): it acts in the program's own process and main thread alone, told by the
// channel the forked ones have and by process.chdir, which a worker thread lacks
// (require("worker_threads") costs ~2 ms).
let programsOwn = process.channel === undefined;
try {
  process.chdir(".");
} catch (error) {
  if (error.code !== "ERR_WORKER_UNSUPPORTED_OPERATION") throw error;
  programsOwn = false;
}
// In every thread and process of the program's: the inspector is closed (a session of its own
// could end what runs, Runtime.terminateExecution or Runtime.evaluate's timeout, which drops
// the microtasks queued, the tests' continuations among them, after which node goes on to its
// own end; or read the harness's memory), and so is the deprecated process.binding, whose
// "inspector" reaches the same, as do "async_wrap" and "fs" what the main thread's harness
// relies on (below: node's, which it reads)
const binding = process.binding;
{
  // (what the wrappers below call, taken before any code of the program's runs: one that it
  // replaced, Reflect.apply or RegExp.prototype.test, could skip their checks)
  const { apply, construct } = Reflect, Errors = Error, { defineProperty } = Object;
  const test = Function.prototype.call.bind(RegExp.prototype.test);
  const closed = (what) => new Errors(`${what} is closed in the sandbox: through it a program `
                                      + "could stop its own code, its tests' among it, unseen");
  let inspector;
  try {
    inspector = require("inspector");
  } catch (_) {}  // (a node built without it)
  for (const name of ["connect", "connectToMainThread"]) {
    if (inspector !== undefined && typeof inspector.Session.prototype[name] === "function") {
      Object.defineProperty(inspector.Session.prototype, name, { writable: false,
        configurable: false, value: { [name]() {
          throw closed(`the inspector (Session.${name})`);
        } }[name] });
    }
  }
  // (and its server, which another process of the program's could reach where the network is
  // allowed)
  if (inspector !== undefined && typeof inspector.open === "function") {
    Object.defineProperty(inspector, "open", { writable: false, configurable: false,
      enumerable: true, value: { open() {
        throw closed("the inspector (inspector.open)");
      } }.open });
  }
  if (typeof binding === "function") {
    process.binding = { binding(name) {  // (named as node's)
      throw new Errors(`process.binding(${JSON.stringify(`${name}`)}) is closed in the sandbox `
                       + "(deprecated, DEP0111): node's internal bindings reach what the test "
                       + "harness relies on (the asynchronous ids it reads, the functions it "
                       + "writes with)");
    } }.binding;
  }
  // ... and so is process.dlopen (native addons, a require of a .node file, which calls it):
  // native code in the process (a module the program builds with g++, or writes out itself)
  // reaches V8's own API, Isolate::TerminateExecution among it, which drops the microtasks
  // queued as the inspector's does (red-team round 28)
  if (typeof process.dlopen === "function") {
    defineProperty(process, "dlopen", { writable: false, configurable: false, enumerable: true,
      value: { dlopen() {  // (named as node's)
        throw closed("loading native code (process.dlopen)");
      } }.dlopen });
  }
  // ... and so is v8.queryObjects's "summary", which shows every object of a class with what
  // it holds (util.inspect's text), the harness's among them, the bytes of the token (red-team
  // round 29); its count shows nothing of that, and stays
  {
    const v8 = require("v8"), queryObjects = v8.queryObjects;
    if (typeof queryObjects === "function") {
      defineProperty(v8, "queryObjects", { writable: false, configurable: false,
        enumerable: true, value: { queryObjects(constructor, options) {  // (named as node's)
          if (typeof options !== "object" || options === null) {
            return apply(queryObjects, v8, arguments.length > 1 ? [constructor, options]
                                                                : [constructor]);
          }
          const format = options.format;  // (read once)
          if (format === "summary") {
            throw closed("v8.queryObjects's summary (it shows what the harness's objects hold)");
          }
          return apply(queryObjects, v8, [constructor, { format }]);
        } }.queryObjects });
    }
  }
  // A worker thread given options of its own (execArgv, through Object.prototype too) would
  // run without this harness, where the inspector is node's: each gets it again (~2 ms a
  // program, what loading worker_threads costs). Node looks up that --require (or the one it
  // inherits) by its name first through the package.json nearest the working directory (a
  // package's reference to itself), whose "exports" a program could point at a file of its own,
  // which node then loaded in the harness's place; but not from a folder named node_modules, as
  // the program's working directory is: a worker thread starts only from there, and once one
  // has, the main thread's working directory stays (process.chdir throws). (What a program
  // changes of the script node sends the thread, as node's constructor runs among its objects,
  // runs after the harness: the harness is in the thread's options.)
  const threads = require("worker_threads"), Original = threads.Worker, preload = __filename;
  // (a worker's own --loader would start the thread of its hooks as below, without it, and a
  // policy of its own could stand in for the harness)
  const isArray = Array.isArray;
  const refused = new RegExp("^--(?:unhandled[-_]rejections|expose[-_]internals"
                             + "|(?:experimental[-_])?loader|experimental[-_]policy"
                             + "|policy[-_]integrity)?(?:=|$)");
  const shared = threads.SHARE_ENV, { entries } = Object;
  // (the working directory, as the kernel names it now: a folder of the program's named
  // node_modules, which it could rename, will not do, nor will the path node keeps of it)
  const { readlinkSync } = require("fs"), working = /\\/node_modules$/;
  const now = () => readlinkSync("/proc/self/cwd"), home = now();
  let started = false;  // (a worker thread has started: the working directory stays)
  if (threads.isMainThread) {
    const chdir = process.chdir;
    process.chdir = { chdir(directory) {  // (named as node's)
      if (started) {
        throw closed("changing the working directory once a worker thread started (node "
                     + "finds the harness of a worker thread from the working directory)");
      }
      return apply(chdir, process, [directory]);
    } }.chdir;
  }
  const Worker = { Worker: function (file) {  // (named as node's, and as long)
    const options = arguments[1];
    if (new.target === undefined) return apply(Original, this, arguments);
    if (!test(working, home) || now() !== home) {
      throw closed("a worker thread started outside the program's working directory (node "
                   + "would find the harness through a package.json there)");
    }
    started = true;
    const given = options == null ? undefined : options.execArgv;
    const env = options == null ? undefined : options.env;  // (each option read once)
    let execArgv, environment = env;
    if (given !== undefined) {  // (the harness's options first, none of the given undoing them)
      if (!isArray(given)) throw new TypeError("a worker's execArgv must be an array");
      execArgv = ["--require", preload, "--unhandled-rejections=strict"];
      for (let at = 0; at < given.length; at++) {  // (each read once, as text)
        const text = `${given[at]}`;
        if (test(refused, text)) throw closed(`a worker's option "${text}"`);
        defineProperty(execArgv, execArgv.length, { value: text, writable: true,
                                                    enumerable: true, configurable: true });
      }
    }
    // Node parses the NODE_OPTIONS of a worker's environment (the env given, else a copy of
    // process.env) wherever it is given execArgv or an env object, and a --require there runs
    // before the harness's: that worker gets its environment without them. A shared one
    // (SHARE_ENV), where another thread could set them meanwhile, only with no options of its
    // own: the thread's, the harness's among them, as node gives a worker none are given
    if (env === shared && execArgv !== undefined) {
      if (execArgv.length > 3) {  // (options of its own, after the harness's three)
        throw closed("a worker's execArgv on a shared environment (SHARE_ENV)");
      }
      execArgv = undefined;
    } else if (env !== shared && ((typeof env === "object" && env !== null)
                                  || (env == null && execArgv !== undefined))) {
      const pairs = entries(env ?? process.env);
      environment = { __proto__: null };
      for (let at = 0; at < pairs.length; at++) {
        const name = `${pairs[at][0]}`;
        if (name !== "NODE_OPTIONS") {
          defineProperty(environment, name, { value: `${pairs[at][1]}`, writable: true,
                                              enumerable: true, configurable: true });
        }
      }
    }
    return construct(Original, [file, { __proto__: options ?? null, execArgv, env: environment }],
                     new.target === Worker ? Original : new.target);
  } }.Worker;
  Worker.prototype = Original.prototype;
  Object.setPrototypeOf(Worker, Object.getPrototypeOf(Original));
  Object.defineProperty(Original.prototype, "constructor", { value: Worker, writable: false,
                                                             configurable: false });
  Object.defineProperty(threads, "Worker", { value: Worker, writable: false, configurable: false,
                                             enumerable: true });
  // ... and node's own constructor of a worker's thread (its C++ handle's, WorkerImpl), which a
  // program reaches from any worker's handle (its kHandle, an async hook's resource) to start a
  // thread with options of its own, without this harness, is closed: taken from the handle of
  // a worker that node refuses for an option, so that its thread never starts
  {
    let handle;
    const Target = function () {};
    Target.prototype = new Proxy(Object.create(Original.prototype), {
      set(_, key, value, receiver) {
        if (typeof key === "symbol" && key.description === "kHandle") handle = value;
        return defineProperty(receiver, key, { value, writable: true, enumerable: true,
                                               configurable: true });
      } });
    try {
      construct(Original, ["0", { eval: true, execArgv: ["--hybridmetric-refused"] }], Target);
    } catch (_) {}  // (refused, as it should be)
    if (handle == null) throw new Errors("the sandbox found no worker handle to close");
    defineProperty(Object.getPrototypeOf(handle), "constructor", { value: undefined,
                                                                   writable: false,
                                                                   configurable: false });
  }
  // ... as are the module loader hooks of any thread but the main one (whose harness bars a
  // pass to a program that registers them, below): node starts their thread with options it
  // reads through Object.prototype, where the program's started it without this harness
  if (!programsOwn) {
    const Module = require("module");
    for (const name of ["register", "registerHooks"]) {
      if (typeof Module[name] === "function") {
        defineProperty(Module, name, { writable: false, configurable: false, enumerable: true,
          value: { [name]() {
            throw closed(`module.${name} in a worker thread`);
          } }[name] });
      }
    }
  }
  // ... and CommonJS modules of the program's look for packages in a node_modules folder of
  // its working directory, itself named node_modules (node's own lookup passes over a folder
  // of that name), as they would in any other folder, and not in the folder itself
  {
    const Module = require("module"), lookups = Module._nodeModulePaths, work = home;
    const starts = Function.prototype.call.bind(String.prototype.startsWith);
    if (test(working, work)) {
      Module._nodeModulePaths = { _nodeModulePaths(from) {  // (named as node's)
        const paths = apply(lookups, Module, [from]), start = `${from}`;
        if (start === work || starts(start, `${work}/`)) {
          for (let at = 0; at < paths.length; at++) {
            if (paths[at] === work) paths[at] = `${work}/node_modules`;
          }
        }
        return paths;
      } }._nodeModulePaths;
    }
  }
  // V8's flags are the process's, set from any thread: natives syntax would open V8's own run
  // of the microtask queue (%PerformMicrotaskCheckpoint), which a vm timeout's termination cuts
  // short, dropping the queue, the tests' continuations among it. Told by its effect (a flag can
  // imply it: --allow-natives-for-differential-fuzzing did), with a compiler taken now
  const v8 = require("v8"), setFlags = v8.setFlagsFromString, { Script } = require("vm");
  const natives = () => {
    try {
      new Script("%GetUndetectable()");  // (a syntax error without it)
      return true;
    } catch (_) {
      return false;
    }
  };
  Object.defineProperty(v8, "setFlagsFromString", { writable: false, configurable: false,
    enumerable: true, value: { setFlagsFromString(flags) {  // (named as node's)
      const text = `${flags}`;
      if (test(/natives|fuzz/, text)) throw closed("V8's natives syntax");
      // and those that print what each frame holds, the harness's among them, as an exception
      // is thrown or a function called (--print-all-exceptions, --trace)
      if (test(/exception|trace/, text)) {
        throw new Errors("V8's tracing is closed in the sandbox: it prints what the harness holds");
      }
      const result = apply(setFlags, this, [text]);
      if (natives()) {
        apply(setFlags, this, ["--no-allow-natives-syntax"]);
        throw closed("V8's natives syntax");
      }
      return result;
    } }.setFlagsFromString });
}
if (programsOwn) {
  // SIGUSR1, on which node would open the inspector's server (process._debugProcess sends it),
  // is the harness's: a listener takes it (one the program removes leaves the signal its
  // default action, which ends the process)
  process.on("SIGUSR1", () => {});
  const fs = require("fs");
  const buffer = new Uint8Array(64);
  const size = fs.readSync(3, buffer, 0, 64, null);
  fs.closeSync(3);
  // the pass token, then the key of any other report (see launcher.TOKEN_BYTES)
  // (as text: a write of text reads no getter of the program's, as one of a typed array reads
  // its byteLength, which a program could make 0 to keep a report from going out)
  // (made as text only as each goes out: a string on the heap, which a heap snapshot of the
  // program's lists with its contents, v8.writeHeapSnapshot, would give the token away)
  const slice = Function.prototype.call.bind(Buffer.prototype.latin1Slice);
  const token = () => slice(buffer, 0, size >> 1), key = () => slice(buffer, size >> 1, size);
  const writeSync = fs.writeSync;
  // Each report goes out in one write, whole in the pipe before anything of the program's can
  // run: fs.writeSync reads its error object's errno and error after the write, through
  // Object.prototype, where a getter of the program's may throw (or a value it set there
  // reads as an error): what that throws is the program's, and the harness's write went out
  const write = (fd, data) => {
    try {
      writeSync(fd, data, null, "latin1");
    } catch (_) {}
  };
  const Errors = Error;
  const reallyExit = process.reallyExit;  // (node's own end of the process, no 'exit' event)
  // The files of all the calls below the function `above` (a program's own frames cannot
  // hide under a window of others), told in a context of the harness's own, made at the first
  // beforeExit (~1 ms): the program's Error (its prepareStackTrace, stackTraceLimit, frozen or
  // replaced) plays no part; nor does an Error of the program's on Object.prototype, which the
  // context's global would find through an object of this context's (its own has no prototype)
  // (compiled now, before any code of the program's runs: options that vm would read from
  // Object.prototype later, a code cache of the program's among them, could replace it)
  const { createContext, Script, compileFunction } = require("vm");
  const bare = Object.create;
  const reader = new Script(`"use strict";
    Error.prepareStackTrace = (_, sites) => sites;
    Error.stackTraceLimit = Infinity;
    (above) => {
      const holder = {};
      Error.captureStackTrace(holder, above);
      return holder.stack.map((site) => [site.getFileName(), site.getFunctionName()]);
    }`);
  const runIn = Function.prototype.call.bind(Script.prototype.runInContext);
  // (which calls its prototype's, node's native one, looked up at each call: it stays node's)
  Object.defineProperty(Object.getPrototypeOf(Script.prototype), "runInContext",
                        { writable: false, configurable: false });
  let callers;
  const files = (above) => {
    if (callers === undefined) {
      callers = runIn(reader, createContext(bare(null)));
    }
    return callers(above);
  };
  const emitter = (name) => name === "node:events" || name === "events.js";  // (before Node 16)
  // where async hooks are on (AsyncLocalStorage, createHook with before or after) or the
  // domain module is loaded, node's call into JavaScript goes through their frames first
  const hooks = new Set(["node:internal/async_hooks", "node:domain",
                         "internal/async_hooks.js", "domain.js"]);  // (before Node 16)
  const throughHooks = (sites) => {
    for (let at = 1; at < sites.length; at++) {
      if (!has(hooks, sites[at][0])) return false;
    }
    return true;
  };
  // ... but not through the domain module's callback for node's own calls (once a domain
  // exists, or async hooks are on): it calls process.domain.enter(), which a program can make
  // any function, as node's context is entered (process, ids 0): an emission of its own there
  // has no frame of its own below
  const throughDomain = (sites) => {
    for (let at = 1; at < sites.length; at++) {
      if (sites[at][1] === "topLevelDomainCallback") return true;
    }
    return false;
  };
  let looped = false;  // the event loop has run (a promise settled before it cannot send it)
  // What keeps node's event loop alive (Node 17+): nothing when node itself says beforeExit,
  // so an emission of the program's own while a timer, an immediate or I/O waits (code that
  // runs after it: the tests, say) sends nothing
  const resources = process.getActiveResourcesInfo;
  const active = typeof resources === "function" ? Function.prototype.call.bind(resources)
    : () => [];
  const idle = () => active(process).length === 0;
  // node's own beforeExit is a callback into JavaScript on behalf of the process object, in
  // no asynchronous context (ids 0), with one argument, the exit code (0 for a program that
  // can pass): an emission of the program's from a promise's reaction or from a handler that
  // node calls itself (a signal's), with no frame of its own below, runs on behalf of nothing,
  // or of the timer, immediate, promise or handle that made it, and gets other arguments.
  // Told from node's own record of the asynchronous contexts (its async_wrap binding, taken
  // before the program runs: see below): one context, ids 0, and the process object itself
  // as its resource, not what async_hooks.executionAsyncResource() shows, which is a
  // resource's own resource_symbol where it has one (a promise's, which a program may set)
  const { executionAsyncResource, executionAsyncId, triggerAsyncId, AsyncResource }
    = require("async_hooks");
  let fromNode = (args) => args.length === 1 && args[0] === 0;
  let unclosed = false;  // an asynchronous scope of the program's was left open (see below)
  if (typeof binding === "function") {
    // (quietly: node warns of that binding's use, DEP0111, once)
    const own = Object.prototype.hasOwnProperty.call(process, "noDeprecation");
    const quiet = process.noDeprecation;
    process.noDeprecation = true;
    const contexts = binding("async_wrap");
    if (own) {
      process.noDeprecation = quiet;
    } else {
      delete process.noDeprecation;
    }
    const { async_hook_fields: fields, async_id_fields: ids, constants } = contexts;
    const { kStackLength, kExecutionAsyncId, kTriggerAsyncId } = constants;
    // the resources that JavaScript pushed (node's callback trampoline, where async hooks are
    // on, writes there the one C++ pushed), and those C++ pushed, by their place on the stack
    const pushed = contexts.execution_async_resources;
    const resourceAt = contexts.executionAsyncResource;
    const hasOwn = Function.prototype.call.bind(Object.prototype.hasOwnProperty);
    const plain = fromNode;
    // (and no more resources than contexts: a context left on the stack, above node's own,
    // whose pop node then took for its own, leaves a hole at the bottom)
    fromNode = (args) => fields[kStackLength] === 1 && ids[kExecutionAsyncId] === 0
      && ids[kTriggerAsyncId] === 0 && pushed.length === (hasOwn(pushed, 0) ? 1 : 0)
      && (hasOwn(pushed, 0) ? pushed[0] : resourceAt(0)) === process && plain(args);
    // That record stays node's: the array of resources that JavaScript pushed, which node pops
    // through its prototype (where a pop of the program's that threw left a context on the
    // stack), has a prototype of the harness's own; and a scope that an AsyncResource opened
    // but did not close (a hook of the program's that overflowed the stack cut node's pop
    // short) makes the program one that cannot pass: node's own context left below it would
    // be the program's to run code in
    Object.setPrototypeOf(pushed, Object.freeze({ __proto__: null, pop: Array.prototype.pop }));
    const inScope = AsyncResource.prototype.runInAsyncScope;
    // (as node's, one a program may replace: node's own it cannot reach)
    Object.defineProperty(AsyncResource.prototype, "runInAsyncScope", {
      value: { runInAsyncScope(fn, thisArg, ...args) {  // (node's name and length)
        const depth = fields[kStackLength], was = unclosed;
        unclosed = true;  // (until the scope is seen closed: a termination runs no finally)
        try {
          return apply(inScope, this, [fn, thisArg, ...args]);
        } finally {
          unclosed = was || fields[kStackLength] !== depth;
        }
      } }.runInAsyncScope });
  } else if (typeof executionAsyncResource === "function") {  // (since Node 13.9)
    const plain = fromNode;
    fromNode = (args) => executionAsyncResource() === process && executionAsyncId() === 0
      && triggerAsyncId() === 0 && plain(args);
  }
  // ... which a program could enter itself, running a callback in the scope of the process
  // object as an AsyncResource's (runInAsyncScope.call(process, ...)) with ids 0 under the
  // resource's symbols set on process, and stay in, where a hook of its own overflows the stack
  // before the scope is left: the symbols cannot be set on process
  for (const symbol of Object.getOwnPropertySymbols(new AsyncResource("hybridmetric"))) {
    Object.defineProperty(process, symbol, { configurable: false, get() {
      throw new Errors("the process object is no AsyncResource in the sandbox: its asynchronous "
                       + "context is the one node's own beforeExit runs in");
    }, set() {} });
  }
  // ... and whose ids (and resources) node's internal bindings could rewrite (process.binding
  // is closed to the program, above: "async_wrap" holds the ids; "fs" the functions the
  // harness writes with, which fs.writeSync looks up at each call: a program's there could drop
  // a report); and a handle's asyncReset, which gives a handle (any of node's: a pipe's, a
  // zlib stream's) the resource and ids of the caller's choice, never gives it the process
  // object's, nor ids (node's own callers give a resource alone)
  if (typeof binding === "function") {
    let handles = binding("pipe_wrap").Pipe.prototype;
    while (!Object.prototype.hasOwnProperty.call(handles, "asyncReset")) {
      handles = Object.getPrototypeOf(handles);
    }
    const asyncReset = handles.asyncReset;
    Object.defineProperty(handles, "asyncReset", { writable: false, configurable: false,
      value: { asyncReset(resource, ...ids) {  // (named as node's)
        if (resource === process || ids.length > 0) {
          throw new Errors("a handle's asyncReset with the process object or with ids is "
                           + "closed in the sandbox: the test harness reads the asynchronous "
                           + "context it would make");
        }
        return apply(asyncReset, this, [resource]);
      } }.asyncReset });
  }
  setImmediate(() => { looped = true; });
  // For an ES module (which node ends with status 13 if it never finishes) the token waits
  // for the module's import, which settles only once its code ran to the end (whatever a
  // top-level await of it waits for)
  const main = require("url").pathToFileURL(process.argv[1]).href;
  const load = (url) => import(url);
  const then = Function.prototype.call.bind(Promise.prototype.then);
  // ... and which node's own promises (its module loader's, while the module's code has not
  // run to its end) would settle through the program's Promise.prototype.then (a promise
  // resolved with another looks up its `then`; an await one whose constructor is no longer
  // Promise): settled early, then. Both stay node's
  for (const name of ["then", "constructor"]) {
    Object.defineProperty(Promise.prototype, name, { writable: false, configurable: false });
  }
  // ... unless the program registers loader hooks (module.register, module.registerHooks),
  // which could resolve that import to another module; and a CommonJS program's no more:
  // node starts the hooks' thread with options it reads through Object.prototype, where
  // execArgv of the program's starts it without this harness
  const Module = require("module"), apply = Reflect.apply;
  let hooked = false;
  for (const name of ["register", "registerHooks"]) {
    const original = Module[name];
    if (typeof original === "function") {
      Module[name] = function (...args) {
        hooked = true;
        return apply(original, this, args);
      };
    }
  }
  // node's own processing of ticks and rejections, which node never calls through
  // process._tickCallback: a program that does, on a stack near its end or under a vm
  // timeout, can have it drop the tests' continuations or their rejection, even in a call
  // that returns (node's record of a rejection, made from C++ with no stack left, fails
  // quietly); any call bars a pass
  let cut = false;
  const tick = process._tickCallback;
  if (typeof tick === "function") {
    process._tickCallback = { _tickCallback(...args) {
      cut = true;
      return apply(tick, this, args);
    } }._tickCallback;
  }
  // node reads process.domain as it records a rejection nothing handled: a getter of the
  // program's there that throws made node drop the record (and print a line the program could
  // keep from view). It is an accessor of the harness's, which nothing can redefine (the
  // domain module, which would, then fails to load)
  let domain = process.domain;
  Object.defineProperty(process, "domain", { configurable: false, enumerable: true,
    get: { domain() { return domain; } }.domain,  // (named as the property)
    set: { domain(value) {
      domain = value;
    } }.domain });
  // A CommonJS main module's code ran to its end: the first module node compiles after this
  // one is the main module, whose compile returns only then (a termination, such as the
  // inspector's Runtime.terminateExecution, unwinds it, after which node goes on)
  let finished = false, first = true;
  const compileModule = Module.prototype._compile;
  Module.prototype._compile = function _compile(...args) {
    if (!first) return apply(compileModule, this, args);
    first = false;
    const result = apply(compileModule, this, args);
    finished = true;
    return result;
  };
  // A CommonJS module is a function's body, from whose top level a `return` ends it before
  // the code after it (the tests) ran: such a program, its source read before it runs, which a
  // script cannot hold (nor anything else but `new.target`, which a script's `(void 0)` stands
  // in for here: in a string, a comment or a regular expression, both are as valid), sends no
  // token
  const source = fs.readFileSync(process.argv[1], "utf8");
  // (what fails to compile other than with a SyntaxError tells nothing: a program nested so
  // deep that the parser's stack, a few frames deeper here than in node's own compile, ran
  // out; such a program gets no pass)
  let unread = false;
  const SyntaxErrors = SyntaxError;
  const compiles = (make) => {
    try {
      make();
      return true;
    } catch (error) {
      unread ||= !(error instanceof SyntaxErrors);
      return false;
    }
  };
  const body = source[0] === "\\ufeff" ? source.slice(1) : source;
  // (its word `new` alone made another name of the same length: no token of the program's
  // removed, nor a line, which a line comment's end could have joined to the next)
  const script = body.replace(/\\bnew(?=\\s*\\.\\s*target\\b)/g, "nEw");
  // Node runs the program as an ES module where its source is no CommonJS module's (a
  // function's body): it has import or export statements, import.meta or a top-level await
  // (Node 20.19+ tells so from the source; before, such a program.js fails to load). Told
  // here from the source read before any code of the program's runs, which can make nothing
  // else of it (a CommonJS program that named a function of its own after node's module
  // runner once passed for an ES module, and its top-level `return` for the end of its code)
  // Both told now, before any code of the program's runs, which could make either compile fail
  // later (a getter of its own on Object.prototype that node's compileFunction reads, V8's
  // flags changed: a CommonJS program that returned early then passed for an ES module)
  const isModule = !compiles(() => compileFunction(
    body, ["exports", "require", "module", "__filename", "__dirname"]));
  const returnsEarly = !isModule && !compiles(() => new Script(script));
  let thrown = false;  // an error nothing caught, whatever handler kept node going after it
  // The token goes out at node's own exit (process.exit emits 'exit' from code of the
  // program's), once node's own beforeExit said, with nothing left to run, that the program
  // can pass (see below): work that a beforeExit listener of the program's started (its tests)
  // then ends first, as node ends only when none is left, where the harness cannot see it all
  // (node's thread pool, a crypto or zlib job, is no resource it counts), and a program's
  // process.exit(0) in its time gets no pass
  let ready = false, refused = false, sent = false;
  const listeners = Function.prototype.call.bind(require("events").prototype.listeners);
  const RangeErrors = RangeError;
  // node's and V8's words for memory they could not give the program (an ArrayBuffer, a
  // WebAssembly memory made or grown) and a worker thread's heap exhausted: its memory (V8 says
  // the same of a grow past wasm32's 65,536 pages, which no limit would allow: memory too)
  const starved = new Set(["Array buffer allocation failed",
                           "WebAssembly.Memory(): could not allocate memory",
                           "WebAssembly.Memory.grow(): Unable to grow instance memory"]);
  const has = Function.prototype.call.bind(Set.prototype.has);
  const capturing = process.hasUncaughtExceptionCaptureCallback;
  const captured = typeof capturing === "function"
    ? Function.prototype.call.bind(capturing, process) : () => false;
  const monitor = (error, origin) => {
    thrown = true;
    try {
      if ((error instanceof RangeErrors && has(starved, error.message))
          || (error instanceof Errors && error.code === "ERR_WORKER_OUT_OF_MEMORY")) {
        write(4, "M" + key());
      } else if (sent) {  // after the token (an exit listener after the harness's):
        write(4, "E" + key());  // it is taken back, whatever exit status the program then sets
        write(2, "hybridmetric: an error nothing caught after node's own exit began (in an "
              + "exit listener): no pass\\n");
      }
    } catch (_) {}
    try {  // what a handler of the program's keeps from view (else node shows it as it ends)
      const kept = listeners(process, "uncaughtException").length > 0 || captured();
      if (kept) {
        write(2, `hybridmetric: an error nothing caught (${origin}), which a handler of the `
              + "program's own (an uncaughtException listener, "
              + "process.setUncaughtExceptionCaptureCallback) then kept from ending node:\\n");
      }
      if (kept || sent) {
        write(2, `${error && error.stack || error}\\n`);
      }
    } catch (_) {}  // (its getters may throw)
    // After the token, the program ends at once, and fails: the report of its error is the
    // program's to drop (it can close fd 4, or read the pipe empty), its exit status is not
    if (sent) {
      reallyExit(1);
    }
  };
  // node's emitter calls each listener through its `apply`: the harness's own, which a program
  // cannot change (one of the program's there, or on Function.prototype, skipped them)
  const applyOf = Function.prototype.apply;
  const sealed = (listener) => Object.freeze(Object.defineProperty(
    listener, "apply", { value: applyOf, writable: false, configurable: false }));
  // The harness hears of an error nothing caught where node reports it: node calls
  // process._fatalException, looked up at each call, before anything the program controls (the
  // uncaughtExceptionMonitor event it emits, whose listeners a program can take off and put
  // back, or edit in process._events; its uncaughtException listeners; a capture callback): the
  // harness's, which hears of the error, then calls node's own
  const fatal = process._fatalException;
  Object.defineProperty(process, "_fatalException", { writable: false, configurable: false,
    value: { _fatalException(error, fromPromise) {  // (named as node's)
      monitor(error, fromPromise ? "unhandledRejection" : "uncaughtException");
      return apply(fatal, this, [error, fromPromise]);
    } }._fatalException });
  // node emits its events through process.emit, looked up at each call: a program's there (a
  // Proxy of node's, called through a bound function, leaves no frame) could turn the event that
  // tells the harness of an error into another, or emit node's own end at its own time. Once a
  // program set one, it gets no pass (node's stays its own property, whatever the program
  // makes of EventEmitter.prototype.emit)
  let emit = process.emit, replaced = false, told = false;
  Object.defineProperty(process, "emit", { configurable: false, enumerable: false,
    get: { emit() { return emit; } }.emit,  // (named as the property)
    set: { emit(value) {
      emit = value;
      replaced = true;
    } }.emit });
  // node's own emission of the event (beforeExit, exit), in its own context: only its event
  // emitter's frame is below (no code of the program's), and those of async hooks and domains
  // where they are on; nothing caught the harness's monitor did not hear of, no scope left open
  const fromNodeItself = (above, args) => {
    if (replaced && !told) {
      told = true;
      write(2, "hybridmetric: the program replaced process.emit, through which node tells the "
            + "harness of its end and of errors: no pass\\n");
    }
    if (thrown || unclosed || replaced || !fromNode(args)) {
      return false;
    }
    const sites = files(above);
    if (sites.length >= 1 && throughDomain(sites)) {
      write(2, "hybridmetric: node's own end came through the domain module's callback (a "
            + "domain made, or async hooks on, with it loaded), which calls what a program "
            + "makes process.domain.enter: no pass\\n");
      return false;
    }
    return sites.length >= 1 && emitter(sites[0][0]) && throughHooks(sites);
  };
  // Node's own beforeExit, with nothing left to run: the program ran (an ES module: once its
  // import settles, which it does only once its code ran to its end, whatever a top-level
  // await of it waited for); a program that emits its own, or while a timer, an immediate or
  // I/O waits, readies nothing, nor does node's own while a listener of the program's that ran
  // before the harness's gave node more to do: the next one decides
  process.on("beforeExit", sealed(function settle(...args) {
    if (ready || refused || !looped || !idle() || !fromNodeItself(settle, args)) return;
    if (unread) {
      write(2, "hybridmetric: the harness could not compile its copy of the program (nested "
            + "too deep for its parser's stack), so cannot tell whether it returns from its "
            + "top level: no pass\\n");
    } else if (hooked) {
      write(2, "hybridmetric: the program registered module loader hooks (module.register), "
            + "whose thread could run without the harness, and through which it cannot tell "
            + "that an ES module ran to its end: no pass\\n");
    } else if (cut) {
      write(2, "hybridmetric: the program called process._tickCallback, node's processing of "
            + "ticks and rejections, which node itself never calls: from deep in the stack, or "
            + "under a vm timeout, it can drop the tests' continuations or their errors: no "
            + "pass\\n");
    } else if (!isModule && !finished) {
      write(2, "hybridmetric: the program's main module did not run to its end (its execution "
            + "was terminated): no pass\\n");
    } else if (returnsEarly) {
      write(2, "hybridmetric: the program returns from its top level (a CommonJS module), "
            + "which may end it before its tests: no pass\\n");
    } else if (isModule) {
      then(load(main), () => { ready = true; });
      return;
    } else {
      ready = true;
      return;
    }
    refused = true;
  }));
  // Node's own exit, which comes only when nothing is left to run, with status 0
  process.on("exit", sealed(function send(...args) {
    if (sent || !ready || !fromNodeItself(send, args)) return;
    sent = true;
    write(4, "T" + token());
  }));
}
"""

#: Raw system calls, not ``read``/``write`` (or ``syscall``): a program's global variable of that
#: name (C++ does not mangle them) would take the place of libc's function at link time.
_CPP_MAIN = """#include <sys/syscall.h>
#include <unistd.h>
static long raw(long number, long fd, const void *buffer, long size) {
#if defined(__x86_64__)
  long result;
  __asm__ volatile("syscall" : "=a"(result)
                   : "a"(number), "D"(fd), "S"(buffer), "d"(size) : "rcx", "r11", "memory");
  return result;
#else
  return syscall(number, fd, buffer, size);
#endif
}
// The token, read (and its descriptor closed) before any code of the program's runs: from the
// executable's .preinit_array, which runs before every constructor (this object is linked
// first, so that its entry comes before any the program makes); and the process it was read
// in, the only one that may send it (not one that a constructor of the program's forked).
// (after the report's kind, "T": the report goes out in one write, which nothing can split)
static char report[65] = {'T'};
static long token_size;
static long token_process;
static void take_token(int, char **, char **) {
  token_size = raw(SYS_read, 3, report + 1, sizeof report - 1);
  raw(SYS_close, 3, nullptr, 0);
  token_process = raw(SYS_getpid, 0, nullptr, 0);
}
// (four slots, aligned as g++ aligns an array of the program's own there, 32 bytes: one would
// leave a gap of zeros before such an array, which the loader would call)
static void nothing(int, char **, char **) {}
__attribute__((section(".preinit_array"), used, aligned(32)))
static void (*const take_token_first[4])(int, char **, char **) = {take_token, nothing, nothing,
                                                                   nothing};
extern "C" int __real_main(int, char **, char **);
extern "C" int __wrap_main(int argc, char **argv, char **envp) {
  // The C runtime calls it once; a call of the program's own (it can name it) after that
  // sends nothing (one before it, from a constructor, runs the tests as the runtime's would).
  static bool entered = false;
  if (entered) return 1;
  entered = true;
  int status = __real_main(argc, argv, envp);
  // the exit status is its low byte; a process the program forked sends no token
  if ((status & 0xff) != 0 || raw(SYS_getpid, 0, nullptr, 0) != token_process) return status;
  // the pass token: the first half of what fd 3 held (see launcher.TOKEN_BYTES); a copy of the
  // program that it ran itself (exec) found none there, and keeps its own status
  long half = token_size / 2;
  if (half <= 0) return status;
  return raw(SYS_write, 4, report, 1 + half) == 1 + half ? 0 : 1;
}
"""

#: The class Java runs: in a package of its own, where no type of the program's (in the
#: unnamed package, or one of its own) can stand for a name it uses (a program's ``class Math``
#: or ``class java`` did), it calls the test's ``main`` by reflection. A program that declares
#: that package is refused (its ``class java`` would stand for ``java.io`` there). It writes
#: ``M`` with the report key when ``main`` ends in an exception after an ``OutOfMemoryError``
#: ended it or another thread (one that the program's own handler does not take; one that
#: ``System.exit`` follows is a failure); each report in one write. (The JVM's words for a
#: start-up that failed count only where it never ran the harness: fd 3 still holds the
#: secrets.)
JAVA_HARNESS = "hybridmetric_harness.HybridmetricMain"
_JAVA_WRAPPER = """package hybridmetric_harness;

public final class HybridmetricMain implements Thread.UncaughtExceptionHandler {
  // an OutOfMemoryError ended a thread of the program's (one without a handler of its own)
  private static volatile boolean starved;

  // (not the process limit, which the JVM calls "unable to create native thread")
  private static boolean outOfMemory(Throwable e) {
    return e instanceof OutOfMemoryError
        && !String.valueOf(e.getMessage()).startsWith("unable to create native thread");
  }

  public void uncaughtException(Thread thread, Throwable e) {  // what the JVM's own prints
    if (outOfMemory(e)) starved = true;
    System.err.print("Exception in thread \\"" + thread.getName() + "\\" ");
    e.printStackTrace(System.err);
  }

  public static void main(String[] args) throws Throwable {
    // the token, taken from fd 3 (which it leaves empty) before any class of the program's loads
    byte[] token = new byte[64];
    int n;
    try (java.io.FileInputStream in = new java.io.FileInputStream("/proc/self/fd/3")) {
      n = in.read(token);
    }
    int half = Math.max(n, 0) / 2;  // the pass token, then the report key
    byte[] report = new byte[half + 1];  // T and the pass token
    report[0] = 'T';
    System.arraycopy(token, 0, report, 1, half);
    java.io.FileOutputStream out = new java.io.FileOutputStream("/proc/self/fd/4");
    Thread.setDefaultUncaughtExceptionHandler(new HybridmetricMain());
    try {
      java.lang.reflect.Method main = Class.forName("%s").getMethod("main", String[].class);
      main.setAccessible(true);
      try {
        main.invoke(null, (Object) new String[0]);
      } catch (java.lang.reflect.InvocationTargetException e) {
        throw e.getCause();  // as if the test's main had thrown it
      }
    } catch (Throwable e) {
      if ((outOfMemory(e) || starved) && half > 0) {  // with the report key: the second half
        token[half - 1] = 'M';
        out.write(token, half - 1, Math.max(n, 0) - half + 1);
      }
      throw e;
    }
    out.write(report);  // made before the program ran: a full heap cannot stop it
  }
}
"""

#: A Java identifier: letters of any script, currency symbols, combining marks, digits but
#: first, ``_`` (what is no white space, separator or operator: javac refuses the rest).
_JAVA_NAME_START = r"[^\s\d{}()\[\];,.<>=+\-*/%&|^!~?:@\"'\\]"
_JAVA_NAME_PART = r"[^\s{}()\[\];,.<>=+\-*/%&|^!~?:@\"'\\]"
_JAVA_NAME = f"{_JAVA_NAME_START}{_JAVA_NAME_PART}*"
#: Where a keyword may start and end: not within a name (``a$package`` and ``a€class`` are
#: names, where a regular expression's ``\b`` would see the keywords)
_JAVA_WORD_START, _JAVA_WORD_END = f"(?<!{_JAVA_NAME_PART})", f"(?!{_JAVA_NAME_PART})"
#: A name spelled backwards.
_JAVA_EMAN = f"{_JAVA_NAME_PART}*{_JAVA_NAME_START}"
#: A type declaration: its kind and name, then what may follow a name (a variable named
#: ``record`` is no declaration).
_JAVA_CLASS = re.compile(rf"{_JAVA_WORD_START}(class|interface|enum|record)\s+({_JAVA_NAME})"
                         rf"(?=\s*(?:[{{<(]|(?:extends|implements|permits){_JAVA_WORD_END}))")
#: An annotation's arguments, parentheses nested in them three deep (``(x = (1 + f(2)))``).
_JAVA_ARGUMENTS = r"\((?:[^()]++|\((?:[^()]++|\((?:[^()]++|\([^()]*+\))*+\))*+\))*+\)"
#: An annotation (``@SuppressWarnings("all")``), not an annotation type's declaration
#: (``@interface``).
_JAVA_ANNOTATION = (rf"@\s*(?!interface{_JAVA_WORD_END}){_JAVA_NAME}(?:\s*\.\s*{_JAVA_NAME})*+"
                    rf"(?:\s*{_JAVA_ARGUMENTS})?+")
#: The top-level public type's declaration: ``public``, other modifiers and annotations, each
#: run of them matched possessively (a failed match gives none of it back: a long run is not
#: split again and again), then its kind and name.
_JAVA_PUBLIC = re.compile(rf"{_JAVA_WORD_START}public\s*+"
                          rf"(?:(?:final|abstract|sealed|non-sealed|strictfp)\s++"
                          rf"|{_JAVA_ANNOTATION}\s*+)*+"
                          rf"(?:{_JAVA_WORD_START}(?:class|interface|enum|record)|@\s*interface)"
                          rf"\s+({_JAVA_NAME})")
#: The program's package (``package`` is a keyword: its first use in code declares it).
_JAVA_PACKAGE = re.compile(rf"{_JAVA_WORD_START}package\s+"
                           rf"({_JAVA_NAME}(?:\s*\.\s*{_JAVA_NAME})*)\s*;")
#: A method ``main`` (its type parameters, if any, whose bounds may nest types' arguments three
#: deep: ``<T extends Comparable<? super T>>``, and the annotations after them): its modifiers
#: are read back from there (:func:`_java_modifiers_before`), not matched forwards, which would
#: read a long run of them again from each of its words.
_JAVA_TYPE_PARAMETERS = r"<(?:[^<>]|<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>)*>"
_JAVA_MAIN = re.compile(rf"(?:{_JAVA_TYPE_PARAMETERS}\s*(?:{_JAVA_ANNOTATION}\s*)*+)?"
                        rf"{_JAVA_WORD_START}void\s+main\s*\(")
#: The parameters of a ``main`` the launcher runs: one array of String (``String[] a``,
#: ``String... a``, ``String a[]``), final or annotated or not, its type too (``java.lang.@A
#: String @B []``); another ``main`` is a method like any other.
_JAVA_ENTRY_PARAMETERS = re.compile(
    rf"\s*(?:(?:final{_JAVA_WORD_END}|{_JAVA_ANNOTATION})\s*)*"
    rf"(?:java\s*\.\s*lang\s*\.\s*(?:{_JAVA_ANNOTATION}\s*)*)?String{_JAVA_WORD_END}\s*"
    rf"(?:(?:{_JAVA_ANNOTATION}\s*)*(?:\[\s*\]|\.\.\.)\s*{_JAVA_NAME}"
    rf"|{_JAVA_NAME}\s*(?:{_JAVA_ANNOTATION}\s*)*\[\s*\])\s*")
#: A modifier a ``main`` may have (in any order; ``public`` and ``static`` are checked: an
#: interface's methods are public without saying so, but for a private one), or an
#: annotation's (qualified) name after its ``@``, spelled backwards, with the space after it:
#: matched on the code read backwards (an annotation's arguments are skipped first: see
#: :func:`_java_modifiers_before`).
_JAVA_MODIFIER_BACKWARDS = re.compile(
    rf"\s*(cilbup|citats|lanif|dezinorhcnys|pftcirts|etavirp)(?!{_JAVA_NAME_PART})"
    rf"|\s*{_JAVA_EMAN}(?:\s*\.\s*{_JAVA_EMAN})*\s*@")
_SPACE = re.compile(r"\s*")
#: A Unicode escape (JLS 3.3) where a backslash may start one: ``\u`` (or ``\uu...``) and four
#: characters, hex digits as javac reads them (:func:`_java_hex`).
_JAVA_UNICODE_ESCAPE = re.compile(r"\\u+(.{4})")
#: Comments, text blocks, string and char literals: where "class X" is not a declaration. One
#: left open runs to the end of the file (a comment, a text block) or of its line (a literal), as
#: far as javac, which refuses it, reads; else each of a file's thousands of ``/*`` would be
#: read to its end, in time that grows with the square of the file.
_JAVA_NOT_CODE = re.compile(r'//[^\n\r]*|/\*.*?(?:\*/|\Z)|"""(?:\\.|[^\\])*?(?:"""|\Z)'
                            r'|"(?:\\.|[^"\\\n\r])*(?:"|(?=[\n\r])|\Z)'
                            r"|'(?:\\.|[^'\\\n\r])*(?:'|(?=[\n\r])|\Z)", re.DOTALL)
#: What javac leaves out of identifiers (``Character.isIdentifierIgnorable``): the ISO control
#: characters that are not white space (and, see :func:`java_code`, the format characters of the
#: Basic Multilingual Plane).
_JAVA_IGNORABLE = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x9f]")
#: A type declared with the name ``String`` (a class, an interface, an annotation type, ...).
_JAVA_STRING_TYPE = re.compile(rf"{_JAVA_WORD_START}(?:class|interface|enum|record|@\s*interface)"
                               rf"\s+String{_JAVA_WORD_END}")
#: Anything but Java's white space (and SUB) after a SUB character.
_JAVA_CODE_AFTER = re.compile(r"[^ \t\f\n\r\x1a]")


def canonical(language: str) -> str:
    """The sandbox's name for a language; unknown languages are an error naming the known ones."""
    name = ALIASES.get(language.lower(), language.lower())
    if name not in LANGUAGES:
        raise ValueError(f"language '{language}' cannot be run; supported: {', '.join(LANGUAGES)}")
    return name


#: The longest file name, in bytes, of Linux's file systems.
NAME_MAX = 255
#: The only PATH anything in the sandbox gets (programs, compilers, the worker itself).
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"


def tool(name: str) -> str:
    path = shutil.which(name, path=SEARCH_PATH)
    if path is None:
        raise FileNotFoundError(f"'{name}' is not installed; install it to run these programs")
    return path


def java_agent_libraries() -> list[str]:
    """The JDK's library of Java agents (``lib/libinstrument.so`` of the ``java`` found), which
    the worker hides from programs (``isolation.hide_files``): a program's JVM would load an
    agent of its own through it, in process (the DiagnosticCommand MBean's
    ``jvmtiAgentLoad``, which ``-XX:+DisableAttachMechanism`` does not stop), and the agent
    opens the harness's classes and frames to the program (red-team round 7). Nothing but
    ``-javaagent`` and that command loads it."""
    found = shutil.which("java", path=SEARCH_PATH)
    if found is None:
        return []
    home = os.path.dirname(os.path.dirname(os.path.realpath(found)))
    library = os.path.join(home, "lib", "libinstrument.so")
    return [library] if os.path.isfile(library) else []


@dataclass(frozen=True)
class Build:
    """Files to write, an optional compile command, and the run command (argv).

    With ``javac_server`` the compile command is the argument list for the worker's warm
    compiler (``javac.py``), not an argv to execute.
    """

    files: dict[str, str]
    compile: list[str] | None
    run: list[str]
    javac_server: bool = False
    #: The command that links what ``compile`` made (C++: the program's object, which the
    #: worker checks first, :func:`sections_of_the_loader`), or None.
    link: list[str] | None = None


def java_code(source: str) -> str:
    """``source`` as javac reads it: Unicode escapes translated first; comments and literals
    blanked out (line ends kept: a CR ends a ``//`` comment too); then the characters javac
    leaves out of identifiers left out of the code (``package hybridmetric_\\u200bharness`` is
    the harness's package), not out of comments, where ``*\\u200b/`` ends none."""
    code = _JAVA_IGNORABLE.sub("", _java_blanked(source))
    if not code.isascii():  # (javac leaves them out one UTF-16 unit at a time: none above it)
        code = "".join(c for c in code if c.isascii() or c > "\uffff"
                       or unicodedata.category(c) != "Cf")
    return code


def _java_blanked(source: str) -> str:
    """``source`` with its Unicode escapes translated and its comments and literals blanked
    out (line ends kept)."""
    source = _java_unescaped(source)
    return _JAVA_NOT_CODE.sub(lambda m: re.sub(r"[^\n\r]", " ", m.group()), source)


def _java_unescaped(source: str) -> str:
    """``source`` with its Unicode escapes translated as javac reads them (JDK 16 on:
    ``com.sun.tools.javac.parser.UnicodeReader``), which is not quite the JLS's rule of an even
    number of backslashes before one: a backslash starts an escape unless it follows a
    backslash that started none, so one that an escape made (``\\u005c``) may be followed by
    another escape, ``\\u005c\\u0022`` reading as a backslash and a quote. A backslash that
    follows one that started none is a plain character and clears the state, as does any other
    character. (A broken escape, ``\\u`` without four hex digits, javac refuses.)"""
    out, copied, end = [], 0, -1  # end: where the last backslash, or escape, ended
    was_backslash = was_escape = False
    at = source.find("\\")
    while at >= 0:
        if at != end:  # (another character between)
            was_backslash = was_escape = False
        if was_backslash and not was_escape:  # (the second of a pair: a plain backslash)
            was_backslash, end = False, at + 1
        elif ((escape := _JAVA_UNICODE_ESCAPE.match(source, at)) is not None
              and (value := _java_hex(escape.group(1))) is not None):
            character, end = chr(value), escape.end()
            if 0xD800 <= value <= 0xDBFF and source.startswith("\\", end):
                character, end = _java_surrogate_pair(source, value, end)
            out += [source[copied:at], character]
            copied = end
            was_backslash, was_escape = character == "\\" and not was_backslash, True
        else:
            was_backslash, was_escape, end = not was_backslash, False, at + 1
        at = source.find("\\", end)
    return "".join(out) + source[copied:]


def _java_surrogate_pair(source: str, high: int, at: int) -> tuple[str, int]:
    """The character that an escaped high surrogate (``high``) and the escaped low one at
    ``at`` make, as javac joins them, and where the two end. ValueError where no low half is
    there: javac looks for it through its escape reader and reads the backslash at ``at`` again
    with the state that look left behind, where its own rule (and the harness's) would not."""
    low = _JAVA_UNICODE_ESCAPE.match(source, at)
    value = _java_hex(low.group(1)) if low is not None else None
    if value is None or not 0xDC00 <= value <= 0xDFFF:
        raise ValueError("the program escapes a high surrogate (\\uD800 to \\uDBFF) without its "
                         "low half, before a backslash, which javac then reads as it would "
                         "nowhere else: the sandbox could not tell where its code is; write the "
                         "character whole")
    return chr(0x10000 + ((high - 0xD800) << 10) + value - 0xDC00), low.end()


def _java_hex(digits: str) -> int | None:
    """The number that hex ``digits`` make as javac reads them (``Character.digit(c, 16)``):
    ASCII ones, any other decimal digit of the Basic Multilingual Plane (``\\u٠٠٤١`` is ``A``)
    and the fullwidth letters A to F; None where one is none."""
    value = 0
    for digit in digits:
        if digit.isascii():
            if digit not in string.hexdigits:
                return None
            value = 16 * value + int(digit, 16)
        elif "\uff21" <= digit <= "\uff26" or "\uff41" <= digit <= "\uff46":
            value = 16 * value + (ord(digit) & 0x1F) + 9
        elif digit <= "\uffff" and unicodedata.category(digit) == "Nd":
            value = 16 * value + unicodedata.decimal(digit)
        else:
            return None
    return value


def java_refuse_early_end(source: str) -> None:
    """ValueError where code follows a SUB character (U+001A, control-Z; raw or as
    ``\\u001a``) outside comments and literals: javac ends the file there (JLS 3.5 allows it
    only last), so what follows, the tests among it, would never compile, and a program that
    closed its class before it would pass without running them."""
    code = _java_blanked(source)
    at = code.find("\x1a")
    if at >= 0 and _JAVA_CODE_AFTER.search(code, at):
        raise ValueError(f"javac ends the file at the SUB character (U+001A, control-Z) on line "
                         f"{code.count(chr(10), 0, at) + 1}, outside a comment or literal: the "
                         "code after it, the tests among it, would never be compiled")


def java_refuse_unmappable(source: str) -> None:
    """ValueError, in javac's words, for a source that holds a byte UTF-8 cannot decode (a
    caller that read the program with ``surrogateescape`` hands it over as a lone surrogate):
    javac, which reads it as UTF-8, refuses the file wherever the byte is, and the file named
    after a public type that holds one could not even be named to it."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = source.encode("utf-8", "surrogateescape")[len(source[:exc.start].encode("utf-8"))]
        raise ValueError(f"line {source.count(chr(10), 0, exc.start) + 1}: error: unmappable "
                         f"character (0x{byte:02X}) for encoding UTF-8 (javac reads the program "
                         "as UTF-8)") from None


def java_public_type(source: str) -> str | None:
    """The top-level public class (interface, enum, record), which names the file."""
    code = java_code(source)
    depth, counted = 0, 0
    for match in _JAVA_PUBLIC.finditer(code):
        depth += code.count("{", counted, match.start()) - code.count("}", counted,
                                                                      match.start())
        counted = match.start()
        if depth == 0:
            return match.group(1)  # (at depth 0: a top-level type)
    return None


@dataclass(frozen=True)
class _JavaType:
    """A type declared in a program: its kind, its simple name, and the innermost type whose
    body holds its declaration (an index into :attr:`_JavaScan.types`; None at top level);
    ``local`` where the block that holds it directly is no named type's body (a method's, an
    anonymous class's, an enum constant's), or it is within such a type: javac numbers its
    binary name (``A$1B``)."""

    kind: str
    name: str
    parent: int | None
    local: bool


@dataclass(frozen=True)
class _JavaScan:
    """What :func:`_java_types` finds: the types, and for each position asked about the type
    whose body is the innermost block that holds it (None where that block is no named type's
    body) and the innermost type whose body holds it at all; ``balanced``: every brace is
    paired (else javac refuses the program, and says why)."""

    types: list[_JavaType]
    directly: list[int | None]
    within: list[int | None]
    balanced: bool


def _java_types(code: str, positions: Sequence[int]) -> _JavaScan:
    """The types declared in ``code`` (comments and literals blanked), in the order of their
    declarations, and where each of ``positions`` (in order) lies (see :class:`_JavaScan`):
    one sweep over the braces, the declarations and the positions, in time linear in the code
    (names are not built here: a chain of nested types would make them grow with its
    square)."""
    declared = list(_JAVA_CLASS.finditer(code))
    events = sorted([(brace.start(), 0, brace.group()) for brace in re.finditer(r"[{}()]", code)]
                    + [(match.start(), 1, index) for index, match in enumerate(declared)]
                    + [(at, 2, index) for index, at in enumerate(positions)])
    types: list[_JavaType] = []
    directly: list[int | None] = [None] * len(positions)
    within: list[int | None] = [None] * len(positions)
    blocks: list[tuple[int | None, int | None]] = []  # each open block: (its type, the innermost)
    waiting: int | None = None  # the type declared last whose body has not opened yet
    # parentheses open, and those where it was declared: a brace in its header's parentheses
    # (an annotation's array, in a record's components or on a type it implements) is no body
    depth = header = 0
    balanced = True
    for position, kind, item in events:
        if kind == 0 and item in "()":
            depth += 1 if item == "(" else -1
        elif kind == 0 and item == "{":
            body = None
            if depth == header:
                if waiting is not None and declared[waiting].end() <= position:
                    body = waiting
                waiting = None
            blocks.append((body, body if body is not None else
                           (blocks[-1][1] if blocks else None)))
        elif kind == 0:
            balanced &= bool(blocks)
            if blocks:
                blocks.pop()
        elif kind == 1:
            own, inner = blocks[-1] if blocks else (None, None)
            local = bool(blocks) and (own is None or types[own].local)
            types.append(_JavaType(declared[item].group(1), declared[item].group(2), inner,
                                   local))
            waiting, header = item, depth
        elif blocks:
            directly[item], within[item] = blocks[-1]
    return _JavaScan(types, directly, within, balanced and not blocks)


def _java_type_name(types: list[_JavaType], index: int) -> str:
    """A type's dotted name, through the types it is declared in."""
    names = []
    at: int | None = index
    while at is not None:
        names.append(types[at].name)
        at = types[at].parent
    return ".".join(reversed(names))


def _java_modifiers_before(backwards: str, at: int, opening: dict[int, int]) -> set[str] | None:
    """The modifiers right before position ``at`` of the code, read on the code spelled
    ``backwards``; the annotations among them are skipped (``public @Deprecated static``), each
    ``)`` of their arguments to its ``(`` (``opening``: the position of each ``)`` of the code's
    paired with its ``(``'s, found once: in a chain of annotations around a chain of ``main``
    each would otherwise be counted out again). None where an annotation's arguments do not
    close."""
    modifiers, position, end = set(), len(backwards) - at, len(backwards) - 1
    while True:
        after = _SPACE.match(backwards, position).end()
        if backwards.startswith(")", after):  # an annotation's arguments: to their "("
            if end - after not in opening:
                return None
            word = _JAVA_MODIFIER_BACKWARDS.match(backwards, end - opening[end - after] + 1)
            if word is None or word.group(1) is not None:
                return None
        else:
            word = _JAVA_MODIFIER_BACKWARDS.match(backwards, position)
            if word is None:
                return modifiers
        if word.group(1) is not None:
            modifiers.add(word.group(1)[::-1])
        position = word.end()


def _paired_parentheses(code: str) -> dict[int, int]:
    """The position of each ``)`` of ``code`` that closes a ``(``, with that ``(``'s."""
    opening, open_ = {}, []
    for parenthesis in re.finditer(r"[()]", code):
        if parenthesis.group() == "(":
            open_.append(parenthesis.start())
        elif open_:
            opening[parenthesis.start()] = open_.pop()
    return opening


def java_main_class(source: str) -> str:
    """The type whose ``public static void main(String[])`` runs (dotted when nested): the last
    one in the file, as the tests come after the code they test (not the public class's: a
    candidate could declare a public class whose ``main`` would run in place of the tests'). A
    method belongs to the type whose body is the innermost block that holds it; a ``main`` of
    other parameters is any method. ValueError where that ``main``'s type has a name javac
    numbers (in a method, an anonymous class or an enum constant's body), or where a ``main``'s
    modifiers cannot be read (an annotation's arguments left open)."""
    code = java_code(source)
    if _JAVA_STRING_TYPE.search(code):
        raise ValueError("the program declares a type named String, which stands for it where "
                         "it is in scope, so that a main(String[] args) there is no main the "
                         "launcher runs: the sandbox could not tell the tests' main from "
                         "another (a candidate's main(java.lang.String[] args) would run in "
                         "its place); rename the type")
    backwards, opening = code[::-1], _paired_parentheses(code)
    closing = {open_: close for close, open_ in opening.items()}
    # (a main whose parameters do not close is taken: javac says what is wrong)
    mains = [(m.start(), _java_modifiers_before(backwards, m.start(), opening))
             for m in _JAVA_MAIN.finditer(code)
             if m.end() - 1 not in closing
             or _JAVA_ENTRY_PARAMETERS.fullmatch(code, m.end(), closing[m.end() - 1])]
    scan = _java_types(code, [at for at, _ in mains])
    # (a program whose braces do not pair cannot compile: its main goes to the type around it,
    # and javac says what is wrong)
    owners = scan.directly if scan.balanced else scan.within
    types, chosen, found = scan.types, None, False
    for (_, modifiers), owner in zip(mains, owners, strict=True):
        if modifiers is None:
            raise ValueError("a Java main method's modifiers cannot be read (an annotation's "
                             "arguments do not close)")
        interface = owner is not None and types[owner].kind == "interface"
        if "static" in modifiers and ("public" in modifiers
                                      or interface and "private" not in modifiers):
            chosen, found = owner, True
    if not found:
        raise ValueError("no 'public static void main(String[] args)' in the Java program")
    if chosen is None:
        raise ValueError("no named class declares the Java main method (it is at top level, "
                         "or in an anonymous class): the sandbox cannot name its class")
    if types[chosen].local and scan.balanced:
        raise ValueError(f"the Java main method's class {types[chosen].name} is declared in a "
                         "block (a method, an anonymous class or an enum constant's body), "
                         "whose class names javac numbers: declare it in a class's body or at "
                         "top level")
    return _java_type_name(types, chosen)


def java_binary_name(source: str) -> str:
    """The name the JVM knows the main class by (:func:`java_main_class`): in the program's
    package, nested classes after a ``$``. ValueError for a program in the harness's package."""
    package = _JAVA_PACKAGE.search(java_code(source))
    name = java_main_class(source).replace(".", "$")
    if package is None:
        return name
    dotted = "".join(package.group(1).split())
    if dotted == JAVA_HARNESS.rpartition(".")[0]:
        raise ValueError(f"the program declares package {dotted}, the test harness's own; "
                         "give it another package")
    return f"{dotted}.{name}"


def uses_stdcxx(source: str) -> bool:
    """Whether the precompiled ``<bits/stdc++.h>`` can stand in for a C++ program's own
    ``#include`` of it: the program includes it before anything that could change what it
    means (a ``#define _GLIBCXX_DEBUG`` or ``NDEBUG``, code, a header of its own or of another
    library), with only blank space, comments and other standard headers before it, its
    lines ended as g++ ends them (at CR LF and at a CR alone). A backslash before it, which
    could join two lines (g++ joins them where only blank space comes between it and the line
    end), or a trigraph (``??/`` is one under ``-std=c++14``), leaves the program to the
    compiler: it then compiles as it is."""
    source = _LINE_ENDS.sub("\n", source)
    position = 0
    while not _STDCXX.match(source, position):
        found = _PREAMBLE.match(source, position)
        if not found or "\\" in found.group() or "??" in found.group():
            return False
        header = found.group(1)
        if header is not None and ("/" in header or "." in header and header not in _C_HEADERS):
            return False
        position = found.end()
    return True


def cxx_flags(standard: str) -> list[str]:
    """g++'s flags for every C++ build: ``standard`` (e.g. ``c++17``, ``gnu++20``), -O0 as
    MultiPL-E, no warnings. ValueError for what names no C++ standard."""
    if not _CPP_STANDARD.fullmatch(standard):
        raise ValueError(f"cpp_standard must name a C++ standard as g++'s -std= does (c++11, "
                         f"c++14, c++17, c++20, c++23, gnu++17, ...), got {standard!r}")
    return [f"-std={standard}", "-O0", "-w"]


def precompile_stdcxx(directory: str, standard: str) -> list[str]:
    """The g++ command that precompiles ``<bits/stdc++.h>`` in ``directory``, under the C++
    ``standard``.

    Programs that include it first (:func:`uses_stdcxx`) get it force-included from the
    precompiled copy, which cuts a compile from ~1.2 s to ~0.25 s. The program's own
    ``#include`` of it then reads it again (it has no include guard): the headers it includes
    have theirs, but for ``<cassert>``, which has none, included again as in the program
    without the copy, so the program means the same.
    """
    with open(f"{directory}/{PCH_NAME}", "w") as handle:
        handle.write("#include <bits/stdc++.h>\n")
    return [tool("g++"), *cxx_flags(standard), "-x", "c++-header", PCH_NAME, "-o",
            f"{PCH_NAME}.gch"]


def compile_cpp_main(directory: str, standard: str) -> list[str]:
    """The g++ command that builds, in ``directory`` and under the C++ ``standard``, the object
    every C++ program is linked with: the ``__wrap_main`` that calls the program's ``main`` and
    emits the token. It is its own translation unit, so a program's ``#define int long long``
    or ``#define write ...`` cannot change it, and it makes its system calls itself, so a
    program's global named ``write`` cannot stand in for libc's."""
    with open(f"{directory}/{CPP_MAIN}.cpp", "w") as handle:
        handle.write(_CPP_MAIN)
    return [tool("g++"), *cxx_flags(standard), "-c", f"{CPP_MAIN}.cpp", "-o", f"{CPP_MAIN}.o"]


def _elf64_order(head: bytes) -> str | None:
    """The ``struct`` byte order of a 64-bit ELF file whose first 64 bytes are ``head``; None
    for what is not one."""
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
        return None
    return "<" if head[5] == 1 else ">"


def writable_image_bytes(path: str) -> int:
    """The memory the writable segments of the ELF executable ``path`` take once loaded (its
    data and bss), which RLIMIT_DATA counts: past the limit the kernel kills the program in
    ``exec``, before it runs. 0 for what is not a 64-bit ELF file."""
    with open(path, "rb") as handle:
        head = handle.read(64)
        order = _elf64_order(head)
        if order is None:
            return 0
        table, size, count = struct.unpack_from(order + "Q", head, 0x20)[0], *struct.unpack_from(
            order + "HH", head, 0x36)
        handle.seek(table)
        headers = handle.read(size * count)
    total = 0
    for start in range(0, len(headers) - size + 1, size):
        kind, flags = struct.unpack_from(order + "II", headers, start)
        if kind == 1 and flags & 2:  # PT_LOAD, PF_W
            total += struct.unpack_from(order + "Q", headers, start + 0x28)[0]
    return total


#: The relocation that has the dynamic loader call a function of the executable's (a GNU
#: indirect function's resolver: ``__attribute__((ifunc))``, ``target_clones``) while it relocates
#: the executable, before its ``.preinit_array`` runs: its number on each 64-bit machine
#: (``e_machine``): x86-64, AArch64, PowerPC64, s390x, RISC-V, LoongArch.
IRELATIVE = {62: 37, 183: 1032, 21: 248, 22: 61, 243: 58, 258: 12}
#: ... and the one that copies a shared library's variable into the executable, for the
#: executable's code to read (its symbol table then defines the copy), on each of them.
COPY = {62: 5, 183: 1024, 21: 19, 22: 9, 243: 4, 258: 4}
#: ... and the one that adds the load address to a constant, the only one against no symbol
#: that the linker makes for an executable (but IRELATIVE's, refused above).
RELATIVE = {62: 8, 183: 1027, 21: 22, 22: 12, 243: 3, 258: 3}
#: ... and the TLS descriptor's, which writes two words, not one (x86-64, AArch64, RISC-V,
#: LoongArch): where it lands is checked over both (red-team round 12).
TLSDESC = {62: 36, 183: 1031, 243: 12, 258: 13}
DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ = 32, 33
#: The dynamic tags that name what the dynamic loader reads as it relocates an executable, each
#: with the tag of its size (None: the size of the section at that address): its relocations,
#: their symbols, the symbols' names, hash tables and versions.
DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_PLTREL, DT_GNU_HASH = 4, 5, 6, 10, 20, 0x6FFFFEF5
DT_RELA, DT_RELASZ, DT_REL, DT_RELSZ, DT_JMPREL, DT_PLTRELSZ = 7, 8, 17, 18, 23, 2
DT_RELR, DT_RELRSZ, DT_VERSYM, DT_VERDEF, DT_VERNEED = 36, 35, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
LOADER_TABLES = {DT_RELA: DT_RELASZ, DT_REL: DT_RELSZ, DT_JMPREL: DT_PLTRELSZ,
                 DT_RELR: DT_RELRSZ, DT_STRTAB: DT_STRSZ, DT_SYMTAB: None, DT_HASH: None,
                 DT_GNU_HASH: None, DT_VERSYM: None, DT_VERNEED: None, DT_VERDEF: None}
#: The dynamic tags of the relocation tables the loader applies, each with the tag of its size
#: and the size of an entry (``Elf64_Rela``, ``Elf64_Rel``; the PLT's: as DT_PLTREL says).
RELOCATION_TABLES = {DT_RELA: (DT_RELASZ, 24), DT_REL: (DT_RELSZ, 16),
                     DT_JMPREL: (DT_PLTRELSZ, None)}
#: The most a table the loader reads may take, as the checks read it (a linker makes tables of
#: some KiB; a file of holes could name one of a GiB): past it, the executable is refused.
TABLE_MAX = 2**26
PT_LOAD, PF_W = 1, 2
SHT_SYMTAB, SHT_RELA, SHT_DYNSYM, SHT_REL, SHT_PREINIT_ARRAY = 2, 4, 11, 9, 16
STT_GNU_IFUNC, STB_LOCAL, PT_DYNAMIC, PT_INTERP, ET_DYN = 10, 0, 2, 3, 3
STT_OBJECT = 1


#: The names of what the linker makes and the dynamic loader reads (the tables it relocates
#: the executable with, its symbols and their names, ``.dynamic``, the GOT and PLT, the loader's
#: name), each with what follows a dot after it: a section of the program's object so named
#: goes into the linker's own (red-team rounds 3 to 8: relocations of the program's that
#: rewrote the linker's, or ``.dynamic`` entries past its end that fooled the checks below).
_LOADER_SECTION = re.compile(r"\.(?:rel|rela|relr|interp|hash|gnu\.hash|dynsym|dynstr|dynamic|"
                             r"dynbss|gnu\.version(?:_[dr])?|got|plt|iplt|igot)(?:\..*)?",
                             re.DOTALL)
SHF_ALLOC, SHF_INFO_LINK = 0x2, 0x40
#: The types of the loaded sections g++ makes (code and data, zeroed data, notes, the init
#: and fini arrays, x86-64's unwind tables): a loaded section of another type of the
#: program's (relocations, symbols, dynamic entries under any name) the linker puts beside the
#: linker's own of that type, which the loader reads (red-team round 9).
_LOADED_KINDS = frozenset({1, 8, 7, 14, 15, 16, 0x70000001})
#: The types of the tables the dynamic loader reads (relocations, their compact form, dynamic
#: entries, dynamic symbols, hash tables, symbol versions): in the program's object, only the
#: assembler's own relocation sections may have one.
_LOADER_KINDS = frozenset({4, 9, 19, 6, 11, 5, 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF})
SHN_XINDEX = 0xFFFF
#: Code the linker compiles (link-time optimisation's bytecode, which its plugin finds by these
#: sections, each excluded from the output; LLVM's, ``.llvmbc``, for a linker that loads its
#: plugin), where the object check cannot read it: a program that wrote it with ``asm`` had
#: sections of the loader's types made at the link (red-team rounds 11 and 12).
_LINK_TIME_CODE = re.compile(r"\.gnu\.(?:offload_|debuglto_)?lto_|\.llvm")
SHF_EXCLUDE = 0x80000000


def sections_of_the_loader(path: str) -> list[str]:
    """The sections of the C++ object ``path`` (the program's) that the linker would merge into
    what the dynamic loader reads, or that the checks of the executable would read as the
    linker's (:func:`code_before_the_harness`): named like the linker's own
    (:data:`_LOADER_SECTION`), loaded and of a type g++ does not make (:data:`_LOADED_KINDS`),
    or of a type of the loader's tables under any name, loaded or not (:data:`_LOADER_KINDS`:
    red-team round 10), as is a second symbol table, and code for the linker to compile
    (:data:`_LINK_TIME_CODE`, or any section excluded from the output). The object's
    relocation sections (``.rela.text``), as the assembler makes them, which the linker applies
    itself, are not among them."""
    with open(path, "rb") as handle:  # (its headers and their names: the data may be large)
        head = handle.read(64)
        order = _elf64_order(head)
        if order is None:
            return ["(not a 64-bit ELF object)"]
        table = struct.unpack_from(order + "Q", head, 0x28)[0]
        size, count, names = struct.unpack_from(order + "HHH", head, 0x3A)
        handle.seek(table)
        first = handle.read(size)
        if len(first) < 0x30:
            return ["(no section headers)"]
        # (extended numbering, past 65,279 sections: the count and the names' index are kept
        # in the first header's size and link)
        count = count or struct.unpack_from(order + "Q", first, 0x20)[0]
        if names == SHN_XINDEX:
            names = struct.unpack_from(order + "I", first, 0x28)[0]
        handle.seek(table)
        headers = handle.read(size * count)
        try:
            offset, length = struct.unpack_from(order + "QQ", headers, names * size + 0x18)
        except struct.error:
            return ["(no section names)"]
        handle.seek(offset)
        name_table = handle.read(length)
    found = []
    kinds = [struct.unpack_from(order + "I", headers, header + 4)[0]
             for header in range(0, len(headers) - size + 1, size)]
    for index, header in enumerate(range(0, len(headers) - size + 1, size)):
        at, kind, flags = struct.unpack_from(order + "IIQ", headers, header)
        link, info = struct.unpack_from(order + "II", headers, header + 0x28)
        name = name_table[at:].partition(b"\0")[0].decode("latin-1")
        # the linker's input: relocations of a section of the object's code or data (it
        # applies them itself), as the assembler makes them; a hand-made one that names no
        # such section is bytes it merges by name or type (red-team rounds 9 and 10)
        relocations = (kind in (SHT_RELA, SHT_REL) and not flags & SHF_ALLOC
                       and flags & SHF_INFO_LINK and 0 < info < len(kinds) and info != index
                       and kinds[info] in _LOADED_KINDS
                       and link < len(kinds) and kinds[link] == SHT_SYMTAB)
        if ((_LOADER_SECTION.fullmatch(name) and not relocations)
                or _LINK_TIME_CODE.match(name) or flags & SHF_EXCLUDE
                or (flags & SHF_ALLOC and kind not in _LOADED_KINDS)
                or (kind in _LOADER_KINDS and not relocations)
                or (kind == SHT_SYMTAB and kinds.index(SHT_SYMTAB) != index)):
            found.append(name or f"(section {index}, of type {kind})")
    return found


_INDIRECT = ("the program defines an indirect function (__attribute__((ifunc)), target_clones or "
             "target overloads), whose resolver the dynamic loader runs")


def code_before_the_harness(path: str) -> str:
    """Why the C++ executable ``path`` could run code of its own before ``take_token`` (from
    ``.preinit_array``, otherwise the executable's first code) and read the token first, or ""
    where it could not: the resolver of an indirect function (:func:`_indirect_functions`), a
    dynamic loader of its own choosing (an ``.interp`` section of the program's), a function
    of its own in the place of one of the dynamic loader's (``__tunable_get_val``), which the C
    library calls as it starts, through its procedure linkage table, where the executable's
    definition is found first (a copy of the loader's variable that the program reads is no
    such definition), or a relocation of its own (bytes in a section named like the linker's,
    ``.rela.*``, which the linker counts among its relocations) that has the loader rewrite
    what it reads next: the executable's ``.dynamic`` section (where ``.preinit_array`` is
    named) or a slot of ``.preinit_array`` that the linker already relocates; or tables the
    loader reads as it relocates the executable, made writable (:func:`_writable_loader_tables`).
    Its symbols and relocations are read both as the section headers find them and as the loader
    does (:func:`_loader_view`), and each check holds for both."""
    with _elf64(path) as (data, order):  # (mapped once, for every check)
        try:
            return _code_before_the_harness(data, order)
        except struct.error:  # (no linker makes one: a table named past the end of the file)
            return "the executable's headers name what lies past its end"


def _code_before_the_harness(data: bytes, order: str | None) -> str:
    if _indirect_functions(data, order):
        return _INDIRECT
    loader = _interpreter(data, order)
    if loader != _system_loader():
        return f"the program names a dynamic loader of its own ({loader}), which runs"
    if order is None:
        return ""
    machine = struct.unpack_from(order + "H", data, 0x12)[0]
    tags = dict(_dynamic_tags(data, order))
    as_loaded = _loader_view(data, order, tags, machine)
    if as_loaded is None:
        return ("the executable's .dynamic names tables of the dynamic loader's outside what it "
                "loads from its file, which the linker never does")
    symbols, relocations = as_loaded
    if any(kind == IRELATIVE.get(machine) for _, kind, _ in relocations) or any(
            kind == STT_GNU_IFUNC and defined for *_, kind, _, defined in symbols):
        return _INDIRECT
    # each check, on the tables as the section headers find them and as the loader does
    views = ((_dynamic_symbols(data, order), _relocations(data, order)), as_loaded)
    for symbols, relocations in views:
        # (the linker's own copies: a data object's, at the address of its symbol; a copy
        # relocation of the program's, of its own function, once excused it: red-team round 8)
        copied = {symbols[symbol][0] for where, kind, symbol in relocations
                  if kind == COPY.get(machine) and symbol < len(symbols)
                  and symbols[symbol][3] == STT_OBJECT and symbols[symbol][4] == where}
        defined = {name for name, exported, *_ in symbols if exported} - copied
        taken = sorted(defined & _loader_definitions(loader))
        if taken:
            return (f"the program defines {', '.join(taken)}, which the dynamic loader defines "
                    "and the C library uses, so that the program's runs,")
    if _writable_loader_tables(data, order, tags, len(as_loaded[0])):
        return ("the program makes writable what the dynamic loader reads as it relocates the "
                "executable (its relocations, symbols or their names: a section of its own named "
                "like the linker's), so that a relocation of its own could rewrite them and run "
                "code of the program's")
    dynamic = next(((start, start + size) for kind, start, size, _ in _segments(data, order)
                    if kind == PT_DYNAMIC), (0, 0))
    # (.preinit_array as the loader finds it, named in .dynamic: a section of that type of
    # the program's, placed first, once stood in for it here)
    start = tags.get(DT_PREINIT_ARRAY, 0)
    preinit = (start, start + tags.get(DT_PREINIT_ARRAYSZ, 0))
    preinit_arrays = sum(kind == SHT_PREINIT_ARRAY for kind, *_ in _section_headers(data, order))
    for symbols, relocations in views:
        early = _rewrites_what_the_loader_reads(symbols, relocations, machine, dynamic, preinit,
                                                preinit_arrays)
        if early:
            return early
    # (the slots the loader fills, as it finds its relocations)
    filled = sum(preinit[0] <= where < preinit[1] for where, *_ in as_loaded[1])
    if (struct.unpack_from(order + "H", data, 0x10)[0] == ET_DYN
            and filled != (preinit[1] - preinit[0]) // 8):
        return ("the program's own .preinit_array, aligned past 32 bytes, leaves a slot after "
                "the harness's that nothing fills, which the dynamic loader would call: that "
                "program could crash")
    return ""


def _rewrites_what_the_loader_reads(symbols: list[Symbol], relocations: list[Relocation],
                                    machine: int, dynamic: tuple[int, int],
                                    preinit: tuple[int, int], preinit_arrays: int) -> str:
    """Why the executable's ``relocations`` (against its dynamic ``symbols``) could have the
    loader run code of the program's (see :func:`code_before_the_harness`): one that rewrites
    its ``.dynamic`` or a slot of ``.preinit_array`` (their addresses) that the linker already
    relocates, or one of a constant's but the relative kind; or a second ``.preinit_array``
    section (``preinit_arrays`` of them); else ""."""
    if preinit_arrays > 1 or any(
            machine in RELATIVE and symbol == 0 and kind not in (0, RELATIVE[machine])
            for _, kind, symbol in relocations):  # (0: none, which the linker may leave)
        return ("the program adds a .preinit_array of its own, or a relocation (in a section "
                "named like the linker's) that writes what the loader makes of a constant, "
                "whose code could run")
    slots = []
    for where, kind, symbol in relocations:  # (what each writes: 8 bytes, a copy its symbol's)
        end = where + (symbols[symbol][2] if kind == COPY.get(machine)
                       and symbol < len(symbols) else 16 if kind == TLSDESC.get(machine) else 8)
        if where < dynamic[1] and dynamic[0] < end:
            slots.append(-1)
        elif where < preinit[1] and preinit[0] < end:
            slots.append(where if end - where == 8 and (where - preinit[0]) % 8 == 0 else -1)
    if -1 in slots or len(slots) != len(set(slots)):
        return ("the program adds a relocation of its own (a section named like the linker's) "
                "that rewrites what the dynamic loader reads next (.dynamic, .preinit_array), "
                "so that code of the program's runs")
    return ""


@functools.cache
def _system_loader() -> str | None:
    """The dynamic loader of this machine's programs: g++'s own."""
    with _elf64(os.path.realpath(tool("g++"))) as (data, order):
        return _interpreter(data, order)


@functools.cache
def _loader_definitions(loader: str) -> frozenset[str]:
    """The names that the dynamic loader defines for other files to find (the global, weak and
    unique symbols of its dynamic symbol table that name a section), and those its relocations
    look up in them (through its procedure linkage table, a call of its own binds to the
    executable's definition first: ``_dl_catch_exception``, which it defines too, red-team round
    13)."""
    with _elf64(loader) as (data, order):
        if order is None:
            return frozenset()
        symbols = _dynamic_symbols(data, order)
        tags = dict(_dynamic_tags(data, order))
        machine = struct.unpack_from(order + "H", data, 0x12)[0]
        _, relocations = _loader_view(data, order, tags, machine) or ([], [])
    return frozenset({name for name, exported, *_ in symbols if exported}
                     | {symbols[symbol][0] for *_, symbol in relocations
                        if 0 < symbol < len(symbols)})


def _interpreter(data: bytes, order: str | None) -> str | None:
    """The dynamic loader that the ELF executable ``data`` names (``PT_INTERP``); None for one
    that names none, or what is not a 64-bit ELF file (``order`` None)."""
    if order is None:
        return None
    for kind, offset, size, _ in _segments(data, order, in_file=True):
        if kind == PT_INTERP:
            return data[offset:offset + size].rstrip(b"\0").decode("utf-8", "surrogateescape")
    return None


#: A dynamic symbol: its name, whether the file defines it for others (not local, in a
#: section), its size, type and value, and whether it is defined (in a section).
Symbol = tuple[str, bool, int, int, int, bool]
#: A relocation: the place it writes, its type and its symbol's index.
Relocation = tuple[int, int, int]


def _dynamic_symbols(data: bytes, order: str) -> list[Symbol]:
    """The symbols of the 64-bit ELF file ``data``'s dynamic symbol table, as its section
    headers find it, in its order."""
    sections = _section_headers(data, order)
    symbols = []
    for kind, offset, length, link, _ in sections:
        if kind == SHT_DYNSYM:
            _, strings, size, _, _ = sections[link]
            symbols += _symbol_entries(data[offset:offset + length], order,
                                       data[strings:strings + size])
    return symbols


def _symbol_entries(table: bytes, order: str, strings: bytes) -> list[Symbol]:
    """The symbols of a table of ``Elf64_Sym`` entries whose names are in ``strings``."""
    symbols = []
    for entry in range(0, len(table) - 23, 24):
        at, info, _, section, value, size = struct.unpack_from(order + "IBBHQQ", table, entry)
        end = strings.find(b"\0", at)
        symbols.append((strings[at:end if end >= 0 else len(strings)].decode(
            "utf-8", "surrogateescape"), info >> 4 != STB_LOCAL and section != 0, size,
            info & 0xF, value, section != 0))
    return symbols


def _loader_view(data: bytes, order: str, tags: dict[int, int],
                 machine: int) -> tuple[list[Symbol], list[Relocation]] | None:
    """The dynamic symbols and relocations of the 64-bit ELF executable ``data`` as the dynamic
    loader finds them: through the entries of its ``.dynamic`` (``tags``), not the section
    headers, which the loader never reads (so a file whose headers hid a table of the loader's
    is checked as it runs). The symbols are as many as its hash tables and relocations name;
    compact relocations (DT_RELR) are the relative relocations they stand for. None where a
    table lies outside what the executable loads from its file (the linker makes none such)."""
    pieces = [(address, offset, size) for (kind, address, _, _), (_, offset, size, _)
              in zip(_segments(data, order), _segments(data, order, in_file=True), strict=True)
              if kind == PT_LOAD]

    def loaded(address: int, size: int) -> bytes | None:
        for start, offset, length in pieces:
            if start <= address and address + size <= start + length and size <= TABLE_MAX:
                found = data[offset + address - start:offset + address - start + size]
                return found if len(found) == size else None
        return None

    relocations: list[Relocation] = []
    for table, (size_tag, step) in RELOCATION_TABLES.items():
        if table in tags:
            entries = loaded(tags[table], tags.get(size_tag, 0))
            if entries is None:
                return None
            step = step or (24 if tags.get(DT_PLTREL) == DT_RELA else 16)
            for entry in range(0, len(entries) - step + 1, step):
                where, info = struct.unpack_from(order + "QQ", entries, entry)
                relocations.append((where, info & 0xFFFFFFFF, info >> 32))
    if DT_RELR in tags:
        words = loaded(tags[DT_RELR], tags.get(DT_RELRSZ, 0) // 8 * 8)
        if words is None:
            return None
        relative = RELATIVE.get(machine, -1)
        relocations += [(where, relative, 0) for where in _relr_places(words, order)]
    if DT_SYMTAB not in tags:
        return [], relocations
    count = max((symbol + 1 for *_, symbol in relocations), default=0)
    if DT_HASH in tags:
        head = loaded(tags[DT_HASH], 8)
        if head is None:
            return None
        count = max(count, struct.unpack_from(order + "I", head, 4)[0])
    if DT_GNU_HASH in tags:
        hashed = _gnu_hash_symbols(loaded, order, tags[DT_GNU_HASH])
        if hashed is None:
            return None
        count = max(count, hashed)
    table = loaded(tags[DT_SYMTAB], 24 * count)
    strings = loaded(tags.get(DT_STRTAB, 0), tags.get(DT_STRSZ, 0))
    if table is None or strings is None:
        return None
    return _symbol_entries(table, order, strings), relocations


def _relr_places(words: bytes, order: str) -> list[int]:
    """The places of the relative relocations that a table of ``DT_RELR`` words stands for:
    an even word is a place, and each odd one a bitmap of the 63 words after the last place
    (bit 1: the first), its next bitmap of the 63 after those."""
    places: list[int] = []
    after = 0  # (the first word a bitmap stands for)
    for (word,) in struct.iter_unpack(order + "Q", words):
        if word & 1:
            places += [after + 8 * bit for bit in range(63) if word >> (bit + 1) & 1]
            after += 63 * 8
        else:
            places.append(word)
            after = word + 8
    return places


def _gnu_hash_symbols(loaded: Callable[[int, int], bytes | None], order: str,
                      address: int) -> int | None:
    """How many symbols the GNU hash table at ``address`` reaches (the last bucket's chain
    ends at the last one); None where the table lies outside what is ``loaded``."""
    head = loaded(address, 16)
    if head is None:
        return None
    count, first, bloom, _ = struct.unpack(order + "IIII", head)
    at = address + 16 + 8 * bloom  # (64-bit bloom words)
    buckets = loaded(at, 4 * count)
    if buckets is None:
        return None
    last = max((bucket for (bucket,) in struct.iter_unpack(order + "I", buckets)), default=0)
    if last < first or not last:  # (no hashed symbol)
        return first
    chain = at + 4 * count + 4 * (last - first)
    for _ in range(TABLE_MAX // 24):  # (a chain longer than a table could hold: refused)
        word = loaded(chain, 4)
        if word is None:
            return None
        last, chain = last + 1, chain + 4
        if struct.unpack(order + "I", word)[0] & 1:  # (the chain's end)
            return last
    return None


def _dynamic_tags(data: bytes, order: str) -> list[tuple[int, int]]:
    """The tag and value of each entry of the 64-bit ELF file ``data``'s dynamic section."""
    entries = []
    for kind, offset, size, _ in _segments(data, order, in_file=True):
        if kind == PT_DYNAMIC:
            for entry in range(offset, offset + size - 15, 16):
                tag, value = struct.unpack_from(order + "QQ", data, entry)
                if tag == 0:  # DT_NULL: the loader reads no further (red-team round 8)
                    break
                entries.append((tag, value))
    return entries


def _relocations(data: bytes, order: str) -> list[tuple[int, int, int]]:
    """The place, type and symbol (its index) of each relocation of the 64-bit ELF file
    ``data``."""
    found = []
    for kind, offset, length, _, _ in _section_headers(data, order):
        if kind in (SHT_RELA, SHT_REL):
            step = 24 if kind == SHT_RELA else 16  # (Elf64_Rela, Elf64_Rel)
            for entry in range(offset, offset + length - step + 1, step):
                where, info = struct.unpack_from(order + "QQ", data, entry)
                found.append((where, info & 0xFFFFFFFF, info >> 32))
    return found


@contextlib.contextmanager
def _elf64(path: str) -> Iterator[tuple[bytes, str | None]]:
    """The bytes of the file ``path``, mapped (not read: a program's executable may take a GiB
    that takes no room on disk, red-team round 13), and their ``struct`` byte order
    (:func:`_elf64_order`)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield b"", None
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data, _elf64_order(data[:64])  # (read as bytes are read)


def _section_headers(data: bytes, order: str) -> list[tuple[int, int, int, int, int]]:
    """The type, offset, size, link and address of each section of the 64-bit ELF file
    ``data``."""
    table = struct.unpack_from(order + "Q", data, 0x28)[0]
    size, count = struct.unpack_from(order + "HH", data, 0x3A)
    return [(struct.unpack_from(order + "I", data, header + 4)[0],
             *struct.unpack_from(order + "QQ", data, header + 0x18),
             struct.unpack_from(order + "I", data, header + 0x28)[0],
             struct.unpack_from(order + "Q", data, header + 0x10)[0])
            for header in range(table, table + size * count, size)]


def _writable_loader_tables(data: bytes, order: str, tags: dict[int, int],
                            symbols: int) -> bool:
    """Whether a table the dynamic loader reads as it relocates the 64-bit ELF executable
    ``data`` (:data:`LOADER_TABLES`, found by its dynamic ``tags``; its dynamic symbols,
    and their versions, as many as ``symbols``) lies in a writable segment, where a relocation
    could rewrite it before the loader reads it (red-team round 7: a writable section of the
    program's, named like the linker's, made the linker's first segment writable, and one of its
    relocations rewrote the linker's own that fills ``.preinit_array``)."""
    writable = [(start, start + size) for kind, start, size, flags in _segments(data, order)
                if kind == PT_LOAD and flags & PF_W]
    sizes = {address: length for _, _, length, _, address in _section_headers(data, order)}
    for tag, width in ((DT_SYMTAB, 24), (DT_VERSYM, 2)):
        if tag in tags:
            sizes[tags[tag]] = max(sizes.get(tags[tag], 0), width * symbols)
    for tag, size_tag in LOADER_TABLES.items():
        if tag in tags:
            start = tags[tag]
            end = start + max(1, tags.get(size_tag, 0) if size_tag else sizes.get(start, 1))
            if any(start < high and low < end for low, high in writable):
                return True
    return False


def _segments(data: bytes, order: str,
              in_file: bool = False) -> list[tuple[int, int, int, int]]:
    """The type, address and size in memory (``in_file``: offset and size in the file) and
    flags of each segment of the 64-bit ELF file ``data``."""
    table = struct.unpack_from(order + "Q", data, 0x20)[0]
    size, count = struct.unpack_from(order + "HH", data, 0x36)
    at, length = (0x08, 0x20) if in_file else (0x10, 0x28)
    return [(struct.unpack_from(order + "I", data, header)[0],
             struct.unpack_from(order + "Q", data, header + at)[0],
             struct.unpack_from(order + "Q", data, header + length)[0],
             struct.unpack_from(order + "I", data, header + 4)[0])
            for header in range(table, table + size * count, size)]


def _indirect_functions(data: bytes, order: str | None) -> int:
    """How many indirect functions the ELF executable ``data`` defines, and relocations it has
    that call one (:data:`IRELATIVE`): the dynamic loader runs their resolvers, code of the
    program's, while it relocates the executable, before ``take_token``, so they could read the
    token first. 0 for what is not a 64-bit ELF file (``order`` None)."""
    if order is None:
        return 0
    machine = struct.unpack_from(order + "H", data, 0x12)[0]
    found = 0
    for kind, offset, length, _, _ in _section_headers(data, order):
        entries = range(offset, offset + length - 23, 24)  # (Elf64_Rela and Elf64_Sym: 24 bytes)
        if kind == SHT_RELA and machine in IRELATIVE:
            found += sum(struct.unpack_from(order + "Q", data, entry + 8)[0] & 0xFFFFFFFF
                         == IRELATIVE[machine] for entry in entries)
        elif kind in (SHT_SYMTAB, SHT_DYNSYM):  # defined (a section index), of type IFUNC
            found += sum(data[entry + 4] & 0xF == STT_GNU_IFUNC
                         and struct.unpack_from(order + "H", data, entry + 6)[0] != 0
                         for entry in entries)
    return found


def build(language: str, source: str, memory_mb: int, cxx: str = ".",
          classpath: Sequence[str] = (), classes: str = ".",
          cpp_standard: str = CPP_STANDARD, js_preload: str = JS_PRELOAD_FILE) -> Build:
    """How to build and run ``source`` (not used for Python, which runs in the fork server).

    ``cxx`` is the directory of the C++ programs' trusted build outputs: the object from
    :func:`compile_cpp_main` and, for programs that include it, the precompiled
    ``<bits/stdc++.h>`` (:func:`precompile_stdcxx`); ``classpath`` lists the jars Java programs
    compile and run against; ``classes`` is the directory that holds a Java program's sources
    and compiled classes (the compile server's, which the program may read but not change);
    ``cpp_standard``: the C++ standard (``cxx`` holds outputs built under the same);
    ``js_preload``: the full path of JavaScript's preload (:data:`JS_PRELOAD_SOURCE`, in a
    folder of the worker's own: node finds it from the working directory, from which alone the
    program's worker threads start, and which a program cannot change once one started).
    """
    if language == "javascript":
        return Build({"program.js": source}, None,
                     [tool("node"), f"--max-old-space-size={memory_mb}",
                      "--unhandled-rejections=strict", "--require", js_preload, "program.js"])
    if language == "cpp":
        header = ["-I", cxx, "-include", PCH_NAME, "-Winvalid-pch"] if uses_stdcxx(source) else []
        return Build({"program.cpp": source},
                     [tool("g++"), *cxx_flags(cpp_standard), "-pipe", *header, "-c",
                      "-o", "program.o", "program.cpp"],
                     ["./program"],
                     link=[tool("g++"), *cxx_flags(cpp_standard), "-fno-use-linker-plugin",
                           "-Wl,--wrap=main",
                           "-Wl,-z,text", "-o", "program", f"{cxx}/{CPP_MAIN}.o", "program.o"])
    if language == "java":
        java_refuse_unmappable(source)
        java_refuse_early_end(source)
        public = java_public_type(source)
        name = f"{public}.java" if public else "Program.java"
        size = len(name.encode("utf-8", "surrogateescape"))
        if size > NAME_MAX:  # (the one name of the program's that names a file)
            raise ValueError(f"the public type {public[:40]}... belongs in a file named after "
                             f"it, {size} bytes long, longer than a file name may be "
                             f"({NAME_MAX} bytes): javac cannot compile it")
        harness = JAVA_HARNESS.replace(".", "/") + ".java"  # (a program may name a class so)
        files = {name: source, harness: _JAVA_WRAPPER % java_binary_name(source)}
        # (no attach: a process of the program's, jcmd, could load an agent into its JVM)
        flags = ["-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto",
                 "-XX:+DisableAttachMechanism"]
        return Build(
            files,
            ["-nowarn", "-proc:none", "-encoding", "UTF-8", "-cp", ":".join([classes, *classpath]),
             "-d", classes, *(f"{classes}/{file}" for file in files)],
            [tool("java"), "-ea", *flags, f"-Xmx{memory_mb}m", "-cp",
             ":".join([classes, *classpath]), JAVA_HARNESS],
            javac_server=True,
        )
    raise ValueError(f"no build recipe for '{language}'")
