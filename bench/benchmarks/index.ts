/** Every benchmark, in the order the report shows them. */
import type { Benchmark } from "../harness.js"
import { claimVsDepth } from "./claimVsDepth.js"
import { coldStart } from "./coldStart.js"
import { listVsHistory } from "./listVsHistory.js"
import { mcpRoundtrip } from "./mcpRoundtrip.js"
import { memorySearch } from "./memorySearch.js"
import { passVsHistory } from "./passVsHistory.js"
import { pgThroughput } from "./pgThroughput.js"
import { submitConcurrent } from "./submitConcurrent.js"
import { submitVsFloor } from "./submitVsFloor.js"
import { workerOverhead } from "./workerOverhead.js"

export const benchmarks: ReadonlyArray<Benchmark> = [
  submitVsFloor,
  submitConcurrent,
  passVsHistory,
  listVsHistory,
  mcpRoundtrip,
  pgThroughput,
  coldStart,
  memorySearch,
  workerOverhead,
  claimVsDepth
]
