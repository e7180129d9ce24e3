import { batchStoreContract } from "../../core/test/contract/BatchStoreContract.js"
import { MemoryBatchStore, StorageMemory } from "../src/index.js"

batchStoreContract("memory", MemoryBatchStore.layer)
batchStoreContract("memory, in the storage layer", StorageMemory.layer())
