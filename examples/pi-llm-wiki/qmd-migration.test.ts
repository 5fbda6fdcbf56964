// Migration from a QMD store written by the TypeScript release's own code (the unpatched
// snapshot's lib/qmd-indexing.ts over @tobilu/qmd). Needs QMD's native SQLite module, which
// `npm install --ignore-scripts` does not build: `run.mjs --qmd-migration` builds better-sqlite3
// from source (node-gyp with the Node 22 headers of the node-<platform>-<arch> package) and runs
// this file in an unpatched copy of the client, with llm-wiki-retrieval installed beside it.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import * as engine from "llm-wiki-retrieval/qmd-indexing";
import { recallWiki } from "llm-wiki-retrieval";
import { reindexQmdVault as qmdReindex } from "../extensions/llm-wiki/lib/qmd-indexing.js";
import { ensureVaultStructure, getVaultPaths } from "../extensions/llm-wiki/lib/utils.js";

const root = mkdtempSync(join(tmpdir(), "pi-llm-wiki-qmd-migration-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it("a QMD store built by the TypeScript release migrates without loss", { timeout: 120_000 }, async () => {
  const paths = getVaultPaths(root);
  ensureVaultStructure(paths);
  writeFileSync(join(paths.dotWiki, "config.json"), JSON.stringify({ topic: "Migration" }));
  for (const [rel, title, body] of [
    ["concepts/tls-rotation.md", "TLS rotation", "Rotate the TLS certificates every 90 days."],
    ["entities/espresso.md", "Espresso", "Grind fine, nine bar, twenty-five seconds."],
  ]) {
    mkdirSync(join(paths.wiki, rel.split("/")[0]), { recursive: true });
    writeFileSync(
      join(paths.wiki, rel),
      `---\ntype: ${rel.startsWith("entities") ? "entity" : "concept"}\ntitle: ${title}\ncreated: 2026-08-09\n---\n\n# ${title}\n\n${body}\n`,
    );
  }

  // 1. The TypeScript release indexes the vault with QMD.
  const old = await qmdReindex(paths, { scope: "changed", components: ["lexical"] });
  expect(old.ok, JSON.stringify(old.errors)).toBe(true);
  expect(old.status.state).toBe("ready");
  expect(existsSync(join(paths.qmdCurrent, "index.sqlite"))).toBe(true);
  expect(existsSync(paths.qmdManifest)).toBe(true);
  const vaultId = old.vaultId;

  // 2. This engine sees it as a store awaiting migration; start-up recovery migrates it (a
  //    lexical reindex publishes this engine's store, then the QMD files are removed).
  const before = await engine.readQmdIndexStatus(paths);
  expect(before.state).toBe("stale");
  const recovered = await engine.recoverQmdIndex(paths);
  expect(recovered.ok, JSON.stringify(recovered.diagnostics)).toBe(true);
  expect(recovered.diagnostics.map((d) => d.code)).toEqual(["qmd_migrated"]);

  // 3. The published store: ready, the same vault id and document count.
  const migrated = await engine.reindexQmdVault(paths, { scope: "changed", components: ["lexical"] });
  expect(migrated.ok, JSON.stringify(migrated.errors)).toBe(true);
  expect(migrated.vaultId).toBe(vaultId);
  expect(migrated.status.state).toBe("ready");
  expect(migrated.status.totalDocuments).toBe(old.status.totalDocuments);
  for (const n of ["current", "previous", "documents", "manifest.json", "swap.json"]) {
    expect(existsSync(join(paths.qmd, n)), n).toBe(false);
  }
  expect(readdirSync(paths.qmd).filter((n) => n.startsWith("store-"))).toHaveLength(1);
  const policy = { includePersonal: false, minScore: 0.25, maxPerVault: 10, maxResults: 5 };
  const recall = await recallWiki(paths, "TLS certificate rotation", { policy, mode: "lexical" });
  expect(recall.results[0]?.id).toBe("concepts/tls-rotation");
});
