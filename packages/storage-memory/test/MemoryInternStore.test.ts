import { internStoreContract } from "../../core/test/contract/InternStoreContract.js"
import { MemoryInternStore, StorageMemory } from "../src/index.js"

internStoreContract("memory", MemoryInternStore.layer)
internStoreContract("memory, in the storage layer", StorageMemory.layer())
