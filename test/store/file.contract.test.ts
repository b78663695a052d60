import { claimNextContract } from "../contract/ClaimNext.contract.js"
import { collectContract } from "../contract/Collect.contract.js"
import { exactPayloadContract } from "../contract/ExactPayload.contract.js"
import { taskStoreContract } from "../contract/TaskStore.contract.js"
import { fileStore } from "../support/stores.js"

taskStoreContract("file", () => fileStore())
exactPayloadContract("file", () => fileStore())
claimNextContract("file", () => fileStore())
collectContract("file", () => fileStore())
