/**
 * A TCP proxy in front of the test server, so that a test can cut, refuse or hold back the
 * connections of one store (however many other suites share the server), and see what went
 * over the wire: every byte each way is recorded until the test starts the recording afresh.
 */
import type { Scope } from "effect"
import { Effect, Layer, Redacted } from "effect"
import * as net from "node:net"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"
import { pgUrl } from "./pg.js"
import { buildService } from "./stores.js"

/** One piece of traffic as the proxy read it from a socket, and which connection it came by. */
export interface Chunk {
  /** Numbers the proxy's connections in the order they were accepted, from 1. */
  readonly connection: number
  readonly data: Buffer
}

/**
 * Everything that went through the proxy since it started or since the last `clear`: what
 * clients sent to the server, and what the server sent back (as it arrived at the proxy, so a
 * reply that `loseNextReply` held back is in it too).
 */
export interface Recording {
  /** What clients sent, every connection's bytes in the order they arrived. */
  readonly sent: () => Buffer
  /** What the server sent back, in the order it arrived. */
  readonly received: () => Buffer
  /** What clients sent, chunk by chunk, each naming its connection. */
  readonly sentChunks: () => ReadonlyArray<Chunk>
  /** What the server sent back, chunk by chunk, each naming its connection. */
  readonly receivedChunks: () => ReadonlyArray<Chunk>
  /** Forget what was recorded so far, both ways: the recording starts afresh. */
  readonly clear: Effect.Effect<void>
}

/**
 * A TCP proxy to the test server. `cut` breaks every connection through it; `refuse` also stops
 * accepting new ones (connections are refused, as by a server that is down) until `accept`.
 */
export interface Proxy {
  readonly port: number
  /** The local ports of the proxy's connections to the server: what pg_stat_activity calls client_port. */
  readonly upstreamPorts: () => ReadonlyArray<number>
  readonly cut: Effect.Effect<void>
  readonly refuse: Effect.Effect<void>
  readonly accept: Effect.Effect<void>
  /**
   * Lose the next reply the server sends: it is held back, and a moment later (once the server
   * has committed what it answered) every connection is cut, as by a network that failed just then.
   */
  readonly loseNextReply: Effect.Effect<void>
  readonly recording: Recording
}

const serverAddress = () => {
  const url = new URL(pgUrl ?? "postgres://127.0.0.1:5432")
  return { host: url.hostname, port: Number(url.port || "5432") }
}

export const tcpProxy: Effect.Effect<Proxy, never, Scope.Scope> = Effect.gen(function* () {
  const target = serverAddress()
  const pairs = new Set<{ readonly client: net.Socket; readonly upstream: net.Socket }>()
  let losing: "no" | "next" | "now" = "no"
  let connections = 0
  let sent: Array<Chunk> = []
  let received: Array<Chunk> = []
  const cutAll = () => {
    for (const { client, upstream } of pairs) {
      client.destroy()
      upstream.destroy()
    }
    pairs.clear()
  }
  const server = net.createServer((client) => {
    const connection = ++connections
    const upstream = net.connect(target.port, target.host)
    const pair = { client, upstream }
    pairs.add(pair)
    const drop = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on("error", drop).on("close", drop)
    upstream.on("error", drop).on("close", drop)
    // A listener beside the pipe's own: both see every chunk, and the pipe forwards it unchanged.
    client.on("data", (chunk: Buffer) => {
      sent.push({ connection, data: chunk })
    })
    client.pipe(upstream)
    upstream.on("data", (chunk: Buffer) => {
      received.push({ connection, data: chunk })
      if (losing === "next") {
        losing = "now"
        setTimeout(() => {
          cutAll()
          losing = "no"
        }, 300)
      }
      if (losing === "no") client.write(chunk)
    })
  })
  const listenOn = (port: number) =>
    Effect.async<number>((resume) => {
      server.listen(port, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : port))
      })
    })
  const cut = Effect.sync(cutAll)
  const close = Effect.async<void>((resume) => {
    if (!server.listening) return resume(Effect.void)
    server.close(() => resume(Effect.void))
  })
  const port = yield* Effect.acquireRelease(listenOn(0), () => Effect.zipRight(cut, close))
  const joined = (chunks: ReadonlyArray<Chunk>) => Buffer.concat(chunks.map((chunk) => chunk.data))
  return {
    port,
    upstreamPorts: () =>
      [...pairs].flatMap(({ upstream }) => (upstream.localPort ? [upstream.localPort] : [])),
    cut,
    // Stop listening first, so that no new connection slips in between.
    refuse: Effect.zipRight(
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        // close() waits for the open connections: cut them so that it returns.
        for (const { client, upstream } of pairs) {
          client.destroy()
          upstream.destroy()
        }
      }),
      cut
    ),
    accept: Effect.asVoid(listenOn(port)),
    loseNextReply: Effect.sync(() => {
      losing = "next"
    }),
    recording: {
      sent: () => joined(sent),
      received: () => joined(received),
      sentChunks: () => [...sent],
      receivedChunks: () => [...received],
      clear: Effect.sync(() => {
        sent = []
        received = []
      })
    }
  }
})

/** A store reaching the server through `proxy`, with a pool of its own. */
export const storeVia = (proxy: Proxy, schema: string) => {
  const url = new URL(pgUrl ?? "")
  url.hostname = "127.0.0.1"
  url.port = String(proxy.port)
  return buildService(
    TaskStore,
    pgTaskStoreLayer({ url: Redacted.make(url.toString()), schema, connectTimeoutMillis: 5_000 }).pipe(
      Layer.provide(Host.layerTest({ hostname: "proxied" }))
    )
  ).pipe(Effect.tap((store) => store.check))
}
