// The server loads libc once, on first need (extended attributes on a file
// write, terminals), and keeps it for the life of the process. A test whose
// in-process server is the first to need it would see the sanitizer count
// that as a leak: tests importing this module load it up front.

import { loadLibc } from "../../src/util/libc.ts";

loadLibc();
