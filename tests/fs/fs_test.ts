import { assert, assertEquals, assertStringIncludes } from "../helpers/assert.ts";
import {
  inProcessStdio,
  ourStdioCommand,
  spawnCommandServer,
  spawnStdioServer,
  type WireClient,
} from "../helpers/wire_client.ts";
import { fsError } from "../../src/fs/errors.ts";
import { protocolError } from "../../src/server/domain_errors.ts";
import type { RpcError } from "../../src/jsonrpc/errors.ts";
import { delay } from "../../src/util/async.ts";

const u = (path: string) => `file://${path.split("/").map(encodeURIComponent).join("/")}`;
const b64 = (s: string) => btoa(s);

async function fixture(): Promise<string> {
  const d = await Deno.realPath(await Deno.makeTempDir({ prefix: "fs-test-" }));
  await Deno.writeTextFile(`${d}/f.txt`, "hello world");
  await Deno.mkdir(`${d}/d1/sub`, { recursive: true });
  await Deno.writeTextFile(`${d}/d1/a.txt`, "a");
  await Deno.writeTextFile(`${d}/d1/sub/b.txt`, "b");
  await Deno.symlink(`${d}/f.txt`, `${d}/link.txt`);
  await Deno.symlink(`${d}/nowhere`, `${d}/dangling`);
  await Deno.symlink(`${d}/d1`, `${d}/dirlink`);
  return d;
}

async function withFs(fn: (c: WireClient, d: string) => Promise<void>): Promise<void> {
  await using s = inProcessStdio();
  await s.client.initialize();
  const d = await fixture();
  try {
    await fn(s.client, d);
  } finally {
    await Deno.remove(d, { recursive: true });
  }
}

const err = async (c: WireClient, method: string, params: unknown) =>
  (await c.call(method, params)).error;

Deno.test("fs/readFile: content, errors by kind, symlink rules, URI validation", async () => {
  await withFs(async (c, d) => {
    assertEquals(await c.request("fs/readFile", { path: u(`${d}/f.txt`) }), {
      dataBase64: b64("hello world"),
    });
    assertEquals(await c.request("fs/readFile", { path: u(`${d}/link.txt`) }), {
      dataBase64: b64("hello world"),
    });
    const binary = crypto.getRandomValues(new Uint8Array(60_000));
    await Deno.writeFile(`${d}/bin`, binary);
    assertEquals(
      Uint8Array.fromBase64((await c.request("fs/readFile", { path: u(`${d}/bin`) })).dataBase64),
      binary,
    );
    const missing = await err(c, "fs/readFile", { path: u(`${d}/missing`) });
    assertEquals(missing, {
      code: -32004,
      message: "No such file or directory (os error 2)",
    });
    assertEquals(await err(c, "fs/readFile", { path: u(`${d}/d1`) }), {
      code: -32600,
      message: `path \`${d}/d1\` is not a file`,
    });
    assertEquals((await err(c, "fs/readFile", { path: u(`${d}/dangling`) })).code, -32004);
    const loop = await err(c, "fs/readFile", { path: u(`${d}/link.txt`), followSymlinks: false });
    assertEquals(loop.code, -32603);
    assertStringIncludes(loop.message, "Symbolic link loop (os error 40)");
    const mid = await err(c, "fs/readFile", {
      path: u(`${d}/dirlink/a.txt`),
      followSymlinks: false,
    });
    assertEquals(mid.code, -32603);
    assertStringIncludes(mid.message, "Not a directory (os error 20)");
    await new Deno.Command("mkfifo", { args: [`${d}/fifo`] }).output();
    assertEquals((await err(c, "fs/readFile", { path: u(`${d}/fifo`) })).code, -32600);
    // URI rules
    assertEquals(await err(c, "fs/readFile", { path: `${d}/f.txt` }), {
      code: -32602,
      message: "invalid URI: relative URL without a base",
    });
    assertEquals(await err(c, "fs/readFile", { path: "http://example.com/x" }), {
      code: -32602,
      message: "unsupported path URI scheme `http`",
    });
    assertEquals(await err(c, "fs/readFile", { path: `${u(d)}/f.txt?x=1` }), {
      code: -32602,
      message: "query parameters are not allowed in path URIs",
    });
    assertEquals(await err(c, "fs/readFile", { path: `${u(d)}/f.txt#frag` }), {
      code: -32602,
      message: "fragments are not allowed in path URIs",
    });
    assertEquals(await err(c, "fs/readFile", { path: `file://otherhost${d}/f.txt` }), {
      code: -32600,
      message: `'file://otherhost${d}/f.txt' is invalid on 'linux'`,
    });
    assertEquals((await err(c, "fs/readFile", { path: `${u(d)}/f%00.txt` })).code, -32602);
    assertEquals((await err(c, "fs/readFile", { path: "file:///C:/x" })).code, -32600);
    // dot segments and localhost are normalised
    assertEquals(
      (await c.request("fs/readFile", { path: `file://localhost${d}/d1/../f.txt` })).dataBase64,
      b64("hello world"),
    );
  });
});

Deno.test("fs/readFile: size limit; stdio carries big files; a declared client limit is honoured", async () => {
  await withFs(async (c, d) => {
    const huge = await Deno.open(`${d}/huge`, { create: true, write: true });
    await huge.truncate(513 * 1024 * 1024); // sparse
    huge.close();
    assertEquals(await err(c, "fs/readFile", { path: u(`${d}/huge`) }), {
      code: -32600,
      message: "file is too large to read: limit is 536870912 bytes",
    });
    // 64 MiB of data is 85 MiB of base64: stdio output lines have no limit.
    const big = await Deno.open(`${d}/big`, { create: true, write: true });
    await big.truncate(64 * 1024 * 1024);
    big.close();
    const r = await c.request("fs/readFile", { path: u(`${d}/big`) }, 60_000);
    assertEquals(r.dataBase64.length, 4 * Math.ceil(64 * 1024 * 1024 / 3));
  });
  // A client that declares a smaller limit gets an immediate, specific error.
  await using s = inProcessStdio();
  await s.client.initialize({ clientName: "small", maxMessageBytes: 1024 * 1024 });
  const d = await Deno.realPath(await Deno.makeTempDir());
  try {
    await Deno.writeFile(`${d}/fits`, new Uint8Array(600 * 1024));
    await Deno.writeFile(`${d}/too-big`, new Uint8Array(800 * 1024));
    assertEquals(
      (await s.client.request("fs/readFile", { path: u(`${d}/fits`) })).dataBase64.length,
      819200,
    );
    const e = await err(s.client, "fs/readFile", { path: u(`${d}/too-big`) });
    assertEquals(e.code, -32600);
    assertStringIncludes(e.message, "read it in blocks with fs/open and fs/readBlock");
  } finally {
    await Deno.remove(d, { recursive: true });
  }
});

Deno.test("fs/writeFile: create, overwrite keeping mode, through symlinks, errors, atomic replacement", async () => {
  await withFs(async (c, d) => {
    assertEquals(
      await c.request("fs/writeFile", { path: u(`${d}/new.txt`), dataBase64: b64("new") }),
      {},
    );
    assertEquals(await Deno.readTextFile(`${d}/new.txt`), "new");
    await Deno.chmod(`${d}/new.txt`, 0o600);
    await c.request("fs/writeFile", { path: u(`${d}/new.txt`), dataBase64: b64("newer") });
    assertEquals([
      await Deno.readTextFile(`${d}/new.txt`),
      (await Deno.stat(`${d}/new.txt`)).mode! & 0o777,
    ], ["newer", 0o600]);
    await c.request("fs/writeFile", { path: u(`${d}/link.txt`), dataBase64: b64("via link") });
    assertEquals(await Deno.readTextFile(`${d}/f.txt`), "via link");
    assert((await Deno.lstat(`${d}/link.txt`)).isSymlink, "the link itself is kept");
    assertEquals(
      (await err(c, "fs/writeFile", {
        path: u(`${d}/link.txt`),
        dataBase64: "",
        followSymlinks: false,
      })).code,
      -32603,
    );
    assertEquals(
      (await err(c, "fs/writeFile", { path: u(`${d}/nodir/x`), dataBase64: "" })).code,
      -32004,
    );
    const dir = await err(c, "fs/writeFile", { path: u(`${d}/d1`), dataBase64: "" });
    assertEquals(dir.code, -32603);
    assertStringIncludes(dir.message, "Is a directory (os error 21)");
    assertEquals(await err(c, "fs/writeFile", { path: u(`${d}/x`), dataBase64: "aGk" }), {
      code: -32600,
      message: "fs/writeFile requires valid base64 dataBase64: Invalid padding",
    });
    assertEquals(await err(c, "fs/writeFile", { path: u(`${d}/x`), dataBase64: "*" }), {
      code: -32600,
      message: "fs/writeFile requires valid base64 dataBase64: Invalid symbol 42, offset 0.",
    });
    await c.request("fs/writeFile", { path: u(`${d}/empty`), dataBase64: "" });
    assertEquals((await Deno.stat(`${d}/empty`)).size, 0);
    // Readers only ever see the old or the new content, never a mix.
    const oldData = "o".repeat(8 * 1024 * 1024);
    const newData = "n".repeat(8 * 1024 * 1024);
    await Deno.writeTextFile(`${d}/atomic`, oldData);
    let torn = 0;
    let stop = false;
    const reader = (async () => {
      while (!stop) {
        const t = await Deno.readTextFile(`${d}/atomic`);
        if (t !== oldData && t !== newData) torn++;
      }
    })();
    for (let i = 0; i < 5; i++) {
      await c.request("fs/writeFile", {
        path: u(`${d}/atomic`),
        dataBase64: b64(i % 2 ? oldData : newData),
      });
    }
    stop = true;
    await reader;
    assertEquals(torn, 0);
    const leftovers = [...Deno.readDirSync(d)].filter((e) => e.name.includes(".exec-server-"));
    assertEquals(leftovers, [], "no temporary files left behind");
  });
});

Deno.test("fs/createDirectory, fs/getMetadata, fs/canonicalize", async () => {
  await withFs(async (c, d) => {
    assertEquals(
      (await err(c, "fs/createDirectory", { path: u(`${d}/a/b/c`), recursive: false })).code,
      -32004,
    );
    assertEquals(await c.request("fs/createDirectory", { path: u(`${d}/a/b/c`) }), {});
    assert((await Deno.stat(`${d}/a/b/c`)).isDirectory);
    assertEquals(
      await c.request("fs/createDirectory", { path: u(`${d}/a/b/c`) }),
      {},
      "existing dir is fine when recursive",
    );
    const exists = await err(c, "fs/createDirectory", { path: u(`${d}/a/b/c`), recursive: false });
    assertEquals(exists.code, -32603);
    assertStringIncludes(exists.message, "File exists (os error 17)");
    for (const recursive of [true, false]) {
      const file = await err(c, "fs/createDirectory", { path: u(`${d}/f.txt`), recursive });
      assertEquals(file.code, -32603);
      assertStringIncludes(file.message, "File exists (os error 17)");
    }
    const meta = await c.request("fs/getMetadata", { path: u(`${d}/link.txt`) });
    assertEquals([meta.isDirectory, meta.isFile, meta.isSymlink, meta.size], [
      false,
      true,
      true,
      11,
    ]);
    assert(Math.abs(meta.modifiedAtMs - Date.now()) < 60_000);
    const dirMeta = await c.request("fs/getMetadata", { path: u(`${d}/d1`) });
    assertEquals([dirMeta.isDirectory, dirMeta.isFile, dirMeta.isSymlink], [true, false, false]);
    assertEquals(
      await err(c, "fs/getMetadata", { path: u(`${d}/link.txt`), followSymlinks: false }),
      { code: -32600, message: "path contains a symbolic link" },
    );
    assertEquals((await err(c, "fs/getMetadata", { path: u(`${d}/dangling`) })).code, -32004);
    await new Deno.Command("mkfifo", { args: [`${d}/fifo`] }).output();
    const fifo = await c.request("fs/getMetadata", { path: u(`${d}/fifo`) });
    assertEquals([fifo.isFile, fifo.isDirectory], [false, false]);
    assertEquals(await c.request("fs/canonicalize", { path: u(`${d}/d1/../link.txt`) }), {
      path: u(`${d}/f.txt`),
    });
    assertEquals((await err(c, "fs/canonicalize", { path: u(`${d}/missing`) })).code, -32004);
    await Deno.mkdir(`${d}/sp ace é`);
    const odd = await c.request("fs/canonicalize", { path: u(`${d}/sp ace é/`) });
    assertEquals(odd.path, `${u(d)}/sp%20ace%20%C3%A9`);
  });
});

Deno.test("fs/readDirectory: target types, dangling links omitted, errors, entry limit", async () => {
  await withFs(async (c, d) => {
    const { entries } = await c.request("fs/readDirectory", { path: u(d) });
    const byName = Object.fromEntries(entries.map((e: { fileName: string }) => [e.fileName, e]));
    assertEquals(Object.keys(byName).sort(), ["d1", "dirlink", "f.txt", "link.txt"]);
    assertEquals(byName["link.txt"], { fileName: "link.txt", isDirectory: false, isFile: true });
    assertEquals(byName["dirlink"], { fileName: "dirlink", isDirectory: true, isFile: false });
    const notDir = await err(c, "fs/readDirectory", { path: u(`${d}/f.txt`) });
    assertEquals(notDir.code, -32603);
    assertStringIncludes(notDir.message, "Not a directory (os error 20)");
    assertEquals((await err(c, "fs/readDirectory", { path: u(`${d}/missing`) })).code, -32004);
    await Deno.mkdir(`${d}/many`);
    for (let i = 0; i < 50_001; i++) Deno.writeFileSync(`${d}/many/${i}`, new Uint8Array(0));
    assertEquals(await err(c, "fs/readDirectory", { path: u(`${d}/many`) }), {
      code: -32603,
      message: "fs/readDirectory returned 50001 entries; limit is 50000",
    });
    Deno.removeSync(`${d}/many/0`);
    assertEquals(
      (await c.request("fs/readDirectory", { path: u(`${d}/many`) })).entries.length,
      50_000,
    );
  });
});

Deno.test("fs/remove: defaults, force, recursion, links removed as links", async () => {
  await withFs(async (c, d) => {
    assertEquals(await c.request("fs/remove", { path: u(`${d}/dirlink`) }), {});
    assert((await Deno.stat(`${d}/d1/a.txt`)).isFile, "link target untouched");
    const notEmpty = await err(c, "fs/remove", { path: u(`${d}/d1`), recursive: false });
    assertEquals(notEmpty.code, -32603);
    assertStringIncludes(notEmpty.message, "Directory not empty (os error 39)");
    assertEquals(await c.request("fs/remove", { path: u(`${d}/d1`) }), {});
    assertEquals(
      await c.request("fs/remove", { path: u(`${d}/d1`) }),
      {},
      "missing is fine with force",
    );
    assertEquals((await err(c, "fs/remove", { path: u(`${d}/d1`), force: false })).code, -32004);
    assertEquals(await err(c, "fs/remove", { path: u(`${d}/f.txt`), followSymlinks: false }), {
      code: -32603,
      message: "recursive no-follow removal is unsupported",
    });
    assertEquals(
      await c.request("fs/remove", {
        path: u(`${d}/link.txt`),
        followSymlinks: false,
        recursive: false,
      }),
      {},
    );
    assert((await Deno.stat(`${d}/f.txt`)).isFile);
    await Deno.mkdir(`${d}/empty`);
    assertEquals(await c.request("fs/remove", { path: u(`${d}/empty`), recursive: false }), {});
  });
});

Deno.test("fs/copy: files, trees, merges, links kept, refusals, no partial destination", async () => {
  await withFs(async (c, d) => {
    await c.request("fs/copy", {
      sourcePath: u(`${d}/f.txt`),
      destinationPath: u(`${d}/copy.txt`),
      recursive: false,
    });
    assertEquals(await Deno.readTextFile(`${d}/copy.txt`), "hello world");
    await Deno.writeTextFile(`${d}/copy.txt`, "old");
    await c.request("fs/copy", {
      sourcePath: u(`${d}/f.txt`),
      destinationPath: u(`${d}/copy.txt`),
      recursive: false,
    });
    assertEquals(await Deno.readTextFile(`${d}/copy.txt`), "hello world", "overwrites");
    const ontoDir = await err(c, "fs/copy", {
      sourcePath: u(`${d}/f.txt`),
      destinationPath: u(`${d}/d1`),
      recursive: false,
    });
    assertEquals(ontoDir.code, -32603);
    assertStringIncludes(ontoDir.message, "Is a directory (os error 21)");
    assertEquals(
      (await err(c, "fs/copy", {
        sourcePath: u(`${d}/missing`),
        destinationPath: u(`${d}/x`),
        recursive: false,
      })).code,
      -32004,
    );
    assertEquals(
      (await err(c, "fs/copy", {
        sourcePath: u(`${d}/f.txt`),
        destinationPath: u(`${d}/nodir/x`),
        recursive: false,
      })).code,
      -32004,
    );
    assertEquals(
      await err(c, "fs/copy", {
        sourcePath: u(`${d}/d1`),
        destinationPath: u(`${d}/d2`),
        recursive: false,
      }),
      { code: -32600, message: "fs/copy requires recursive: true when sourcePath is a directory" },
    );
    assertEquals(
      await err(c, "fs/copy", {
        sourcePath: u(`${d}/d1`),
        destinationPath: u(`${d}/d1/sub/deeper`),
        recursive: true,
      }),
      {
        code: -32600,
        message: "fs/copy cannot copy a directory to itself or one of its descendants",
      },
    );
    assertEquals(
      (await err(c, "fs/copy", {
        sourcePath: u(`${d}/d1`),
        destinationPath: u(`${d}/d1`),
        recursive: true,
      })).code,
      -32600,
    );
    await Deno.symlink("a.txt", `${d}/d1/rel-link`);
    await c.request("fs/copy", {
      sourcePath: u(`${d}/d1`),
      destinationPath: u(`${d}/d2`),
      recursive: true,
    });
    assertEquals(await Deno.readTextFile(`${d}/d2/sub/b.txt`), "b");
    assertEquals(await Deno.readLink(`${d}/d2/rel-link`), "a.txt", "symlinks copied as symlinks");
    // merge into an existing directory: no extra nesting
    await Deno.mkdir(`${d}/d3`);
    await Deno.writeTextFile(`${d}/d3/keep.txt`, "k");
    await c.request("fs/copy", {
      sourcePath: u(`${d}/d1`),
      destinationPath: u(`${d}/d3`),
      recursive: true,
    });
    assertEquals([
      await Deno.readTextFile(`${d}/d3/a.txt`),
      await Deno.readTextFile(`${d}/d3/keep.txt`),
    ], ["a", "k"]);
    await c.request("fs/copy", {
      sourcePath: u(`${d}/link.txt`),
      destinationPath: u(`${d}/link2`),
      recursive: false,
    });
    assertEquals(await Deno.readLink(`${d}/link2`), `${d}/f.txt`);
    // A tree with a FIFO is refused and leaves no destination behind.
    await new Deno.Command("mkfifo", { args: [`${d}/d1/sub/pipe`] }).output();
    const special = await err(c, "fs/copy", {
      sourcePath: u(`${d}/d1`),
      destinationPath: u(`${d}/d4`),
      recursive: true,
    });
    assertEquals(special.code, -32600);
    assertStringIncludes(
      special.message,
      "fs/copy only supports regular files, directories, and symlinks",
    );
    assertEquals(
      [...Deno.readDirSync(d)].filter((e) => e.name === "d4" || e.name.includes(".exec-server-")),
      [],
    );
  });
});

Deno.test("fs handles: reads, writes with holes, limits, ids, ordering, commit on close", async () => {
  await withFs(async (c, d) => {
    assertEquals(await c.request("fs/open", { handleId: "h1", path: u(`${d}/f.txt`) }), {
      handleId: "h1",
    });
    assertEquals(await c.request("fs/readBlock", { handleId: "h1", offset: 6, len: 100 }), {
      chunk: b64("world"),
      eof: true,
    });
    assertEquals(await c.request("fs/readBlock", { handleId: "h1", offset: 0, len: 5 }), {
      chunk: b64("hello"),
      eof: false,
    });
    assertEquals(await c.request("fs/readBlock", { handleId: "h1", offset: 100, len: 5 }), {
      chunk: "",
      eof: true,
    });
    assertEquals(await err(c, "fs/readBlock", { handleId: "h1", offset: 0, len: 1048577 }), {
      code: -32600,
      message: "file read block length must be between 1 and 1048576",
    });
    assertEquals(
      (await err(c, "fs/readBlock", { handleId: "h1", offset: 0, len: 0 })).code,
      -32600,
    );
    assertEquals(await err(c, "fs/open", { handleId: "h1", path: u(`${d}/f.txt`) }), {
      code: -32600,
      message: "file handle `h1` already exists",
    });
    assertEquals(await err(c, "fs/open", { handleId: "1".repeat(33), path: u(`${d}/f.txt`) }), {
      code: -32600,
      message: "file handle ID must not exceed 32 bytes",
    });
    assertEquals(await err(c, "fs/open", { handleId: "h2", path: u(`${d}/d1`) }), {
      code: -32600,
      message: `path \`${d}/d1\` is not a file`,
    });
    assertEquals(
      (await err(c, "fs/open", { handleId: "h2", path: u(`${d}/missing`) })).code,
      -32004,
    );
    assertEquals(
      (await err(c, "fs/open", { handleId: "h2", path: u(`${d}/f.txt`), mode: "append" })).message,
      "unknown variant `append`, expected `read` or `replace`",
    );
    // A handle keeps reading the file it opened even after it is unlinked.
    await Deno.remove(`${d}/f.txt`);
    assertEquals(
      (await c.request("fs/readBlock", { handleId: "h1", offset: 0, len: 5 })).chunk,
      b64("hello"),
    );
    assertEquals(await c.request("fs/close", { handleId: "h1" }), {});
    assertEquals(await err(c, "fs/readBlock", { handleId: "h1", offset: 0, len: 1 }), {
      code: -32004,
      message: "unknown file handle `h1`",
    });
    assertEquals(await c.request("fs/close", { handleId: "never-opened" }), {});

    // replace: holes are zeros; the target only changes at fs/close
    await Deno.writeTextFile(`${d}/out.bin`, "previous");
    await c.request("fs/open", { handleId: "w", path: u(`${d}/out.bin`), mode: "replace" });
    assertEquals(
      await c.request("fs/writeBlock", { handleId: "w", offset: 4, chunk: b64("hi") }),
      {},
    );
    assertEquals(await Deno.readTextFile(`${d}/out.bin`), "previous", "not replaced before close");
    assertEquals(await err(c, "fs/writeBlock", { handleId: "w", offset: 0, chunk: "" }), {
      code: -32600,
      message: "file write block length must be between 1 and 1048576",
    });
    const badFd = await err(c, "fs/readBlock", { handleId: "w", offset: 0, len: 1 });
    assertEquals(badFd.code, -32603);
    assertStringIncludes(badFd.message, "Bad file descriptor (os error 9)");
    await c.request("fs/close", { handleId: "w" });
    assertEquals(await c.request("fs/readFile", { path: u(`${d}/out.bin`) }), {
      dataBase64: "AAAAAGhp",
    });
    await c.request("fs/open", { handleId: "r", path: u(`${d}/out.bin`) });
    assertEquals(await err(c, "fs/writeBlock", { handleId: "r", offset: 0, chunk: b64("x") }), {
      code: -32004,
      message: "unknown file handle `r`",
    });
    await c.request("fs/close", { handleId: "r" });
    assertEquals(
      (await err(c, "fs/open", { handleId: "w2", path: u(`${d}/d1`), mode: "replace" })).code,
      -32603,
    );
    assertEquals(
      (await err(c, "fs/open", { handleId: "w2", path: u(`${d}/nodir/x`), mode: "replace" })).code,
      -32004,
    );

    // 10 MiB through 1 MiB blocks, pipelined, both ways, byte-exact.
    const data = crypto.getRandomValues(new Uint8Array(10 * 1024 * 1024 + 123).subarray(0, 65536));
    const big = new Uint8Array(10 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i += data.length) {
      big.set(data.subarray(0, Math.min(data.length, big.length - i)), i);
    }
    await c.request("fs/open", { handleId: "up", path: u(`${d}/big.bin`), mode: "replace" });
    const blocks = [];
    for (let off = 0; off < big.length; off += 1048576) {
      blocks.push(
        c.request("fs/writeBlock", {
          handleId: "up",
          offset: off,
          chunk: big.subarray(off, off + 1048576).toBase64(),
        }),
      );
    }
    await Promise.all(blocks);
    await c.request("fs/close", { handleId: "up" });
    await c.request("fs/open", { handleId: "down", path: u(`${d}/big.bin`) });
    const parts = await Promise.all(
      Array.from(
        { length: Math.ceil(big.length / 1048576) },
        (_, i) =>
          c.request("fs/readBlock", { handleId: "down", offset: i * 1048576, len: 1048576 }),
      ),
    );
    const back = new Uint8Array(big.length);
    parts.forEach((p, i) => back.set(Uint8Array.fromBase64(p.chunk), i * 1048576));
    assertEquals(back, big);
    assert(parts.at(-1)?.eof);
  });
});

Deno.test("fs handles: 128 per connection, released with the connection (uncommitted writes discarded)", async () => {
  const d = await Deno.realPath(await Deno.makeTempDir());
  try {
    await Deno.writeTextFile(`${d}/f`, "x");
    const s = inProcessStdio();
    const c = s.client;
    await c.initialize();
    for (let i = 0; i < 127; i++) {
      await c.request("fs/open", { handleId: `h${i}`, path: u(`${d}/f`) });
    }
    await c.request("fs/open", { handleId: "w", path: u(`${d}/target`), mode: "replace" });
    await c.request("fs/writeBlock", { handleId: "w", offset: 0, chunk: b64("partial") });
    assertEquals(await err(c, "fs/open", { handleId: "one-too-many", path: u(`${d}/f`) }), {
      code: -32600,
      message: "at most 128 file handles may be open per connection",
    });
    await c.request("fs/close", { handleId: "h0" });
    await c.request("fs/open", { handleId: "again", path: u(`${d}/f`) });
    await s[Symbol.asyncDispose]();
    assertEquals(
      [...Deno.readDirSync(d)].map((e) => e.name).sort(),
      ["f"],
      "no target, no temp file",
    );
  } finally {
    await Deno.remove(d, { recursive: true });
  }
});

Deno.test("fs/walk: breadth-first, sorted, hidden pruning, links, limits", async () => {
  await withFs(async (c, d) => {
    await Deno.mkdir(`${d}/.hidden/inner`, { recursive: true });
    await Deno.writeTextFile(`${d}/.dotfile`, "");
    const opts = (over: Record<string, unknown> = {}) => ({
      maxDepth: 64,
      maxDirectories: 10000,
      maxEntries: 50000,
      followDirectorySymlinks: false,
      pruneHiddenDirectories: false,
      ...over,
    });
    const r = await c.request("fs/walk", { path: u(d), options: opts() });
    const rel = (e: { path: string }) => decodeURIComponent(e.path.slice(u(d).length + 1));
    assertEquals(r.entries.map((e: { path: string; kind: string }) => `${rel(e)}:${e.kind}`), [
      ".dotfile:file",
      ".hidden:directory",
      "d1:directory",
      "f.txt:file",
      ".hidden/inner:directory",
      "d1/a.txt:file",
      "d1/sub:directory",
      "d1/sub/b.txt:file",
    ]);
    assertEquals(r.truncated, false);
    const pruned = await c.request("fs/walk", {
      path: u(d),
      options: opts({ pruneHiddenDirectories: true }),
    });
    assert(pruned.entries.some((e: { path: string }) => rel(e) === ".hidden"));
    assert(!pruned.entries.some((e: { path: string }) => rel(e) === ".hidden/inner"));
    const linked = await c.request("fs/walk", {
      path: u(d),
      options: opts({ followDirectorySymlinks: true }),
    });
    assert(
      linked.entries.some((e: { path: string; kind: string }) =>
        rel(e) === "dirlink" && e.kind === "directory"
      ),
    );
    assert(
      !linked.entries.some((e: { path: string }) => rel(e).startsWith("dirlink/")),
      "d1 is not descended twice",
    );
    const shallow = await c.request("fs/walk", { path: u(d), options: opts({ maxDepth: 1 }) });
    assertEquals(shallow.entries.length, 4);
    const capped = await c.request("fs/walk", { path: u(d), options: opts({ maxEntries: 3 }) });
    assertEquals([capped.entries.length, capped.truncated], [3, true]);
    const fewDirs = await c.request("fs/walk", {
      path: u(d),
      options: opts({ maxDirectories: 1 }),
    });
    assertEquals(fewDirs.truncated, true);
    assertEquals(
      await err(c, "fs/walk", { path: u(d), options: opts({ maxEntries: 1_000_000 }) }),
      {
        code: -32600,
        message:
          "filesystem walk limits exceed maximums: depth=64, directories=10000, entries=50000",
      },
    );
    assertEquals(
      await err(c, "fs/walk", {
        path: u(d),
        options: opts({ maxDepth: 0, maxDirectories: 0, maxEntries: 0 }),
      }),
      { code: -32600, message: "filesystem walk limits must be greater than zero" },
    );
    assertEquals(
      (await err(c, "fs/walk", { path: u(`${d}/missing`), options: opts() })).code,
      -32004,
    );
    assertEquals(
      (await err(c, "fs/walk", { path: u(d), options: { maxDepth: 1 } })).message,
      "missing field `maxDirectories`",
    );
  });
});

Deno.test("fs/watchMissing: one one-shot watch per connection with increasing ids", async () => {
  await withFs(async (c, d) => {
    const watch = (watchId: number, missing: string[]) =>
      c.request("fs/watchMissing", { watchId, missing: missing.map((p) => u(`${d}/${p}`)) });
    const fired: number[] = [];
    const collect = () => {
      for (const m of c.received) {
        if (m.method === "fs/missingChanged" && !fired.includes(m.params.watchId)) {
          fired.push(m.params.watchId);
        }
      }
    };
    assertEquals(await watch(10, ["a"]), { watching: true });
    assertEquals(await watch(11, ["b", "c"]), { watching: true });
    await Deno.writeTextFile(`${d}/a`, "");
    await delay(300);
    collect();
    assertEquals(fired, [], "watch 10 was replaced");
    await Deno.writeTextFile(`${d}/b`, "");
    const note = await c.notification("fs/missingChanged", () => true, 3000);
    assertEquals(note.params, { watchId: 11 });
    await Deno.writeTextFile(`${d}/c`, "");
    await delay(300);
    assertEquals(c.received.filter((m) => m.method === "fs/missingChanged").length, 0, "one-shot");
    assertEquals(await watch(5, ["d"]), { watching: false }, "ids must increase");
    assertEquals(await watch(13, ["e"]), { watching: true });
    assertEquals(await watch(14, []), { watching: false });
    await Deno.writeTextFile(`${d}/e`, "");
    assertEquals(await watch(15, ["f.txt"]), { watching: false }, "nothing missing");
    // A missing ancestor appearing fires too.
    assertEquals(await watch(16, ["x/y/z"]), { watching: true });
    await Deno.mkdir(`${d}/x`);
    assertEquals((await c.notification("fs/missingChanged", () => true, 3000)).params, {
      watchId: 16,
    });
    assertEquals(
      (await err(c, "fs/watchMissing", { watchId: 20, missing: u(`${d}/q`) })).message,
      `invalid type: string ${JSON.stringify(u(`${d}/q`))}, expected a sequence`,
    );
  });
});

Deno.test("fs error mapping: permission and invalid input are -32600, the rest -32603", () => {
  // The filesystem layer's kinds, as the server's dispatch turns them into codes.
  const code = (error: Error) => (protocolError(fsError(error, "/x")) as RpcError).code;
  assertEquals(
    code(new Deno.errors.PermissionDenied("Permission denied (os error 13): open '/x'")),
    -32600,
  );
  assertEquals(
    code(new Deno.errors.InvalidData("Invalid argument (os error 22)")),
    -32600,
  );
  assertEquals(
    code(new Deno.errors.NotFound("No such file or directory (os error 2)")),
    -32004,
  );
  assertEquals(code(new Error("Directory not empty (os error 39)")), -32603);
  assertEquals(
    fsError(new Deno.errors.FilesystemLoop("Too many levels of symbolic links (os error 40)"), "/x")
      .message,
    "Symbolic link loop (os error 40)",
  );
});

Deno.test("fs: permission denied for real (root runs the server without capabilities)", async () => {
  // Root reads a mode-000 file through CAP_DAC_OVERRIDE; a server started
  // with an empty capability bounding set has none, as an ordinary user.
  const server = Deno.uid() === 0
    ? spawnCommandServer("setpriv", ["--bounding-set=-all", "--", ...ourStdioCommand()])
    : spawnStdioServer(["serve", "--listen", "stdio", "--log-level", "error"]);
  await using s = server;
  await s.client.initialize();
  const d = await fixture();
  try {
    await Deno.writeTextFile(`${d}/secret`, "s");
    await Deno.chmod(`${d}/secret`, 0o000);
    assertEquals(await err(s.client, "fs/readFile", { path: u(`${d}/secret`) }), {
      code: -32600,
      message: "Permission denied (os error 13)",
    });
  } finally {
    await Deno.remove(d, { recursive: true });
  }
});
