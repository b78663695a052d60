import { claimNextContract } from "../contract/ClaimNext.contract.js"
import { collectContract } from "../contract/Collect.contract.js"
import { exactPayloadContract } from "../contract/ExactPayload.contract.js"
import { taskStoreContract } from "../contract/TaskStore.contract.js"
import { memoryStore } from "../support/stores.js"

taskStoreContract("memory", () => memoryStore())
exactPayloadContract("memory", () => memoryStore())
claimNextContract("memory", () => memoryStore())
collectContract("memory", () => memoryStore())
