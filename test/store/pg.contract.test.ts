import { claimNextContract } from "../contract/ClaimNext.contract.js"
import { collectContract } from "../contract/Collect.contract.js"
import { exactPayloadContract } from "../contract/ExactPayload.contract.js"
import { describe } from "@effect/vitest"
import { taskStoreContract } from "../contract/TaskStore.contract.js"
import { pgAvailable, pgStore } from "../support/pg.js"

describe.skipIf(!pgAvailable)("PostgreSQL", () => {
  taskStoreContract("postgres", () => pgStore())
  exactPayloadContract("postgres", () => pgStore())
  claimNextContract("postgres", () => pgStore())
  collectContract("postgres", () => pgStore())
})
