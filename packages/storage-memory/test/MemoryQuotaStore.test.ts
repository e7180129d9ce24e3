import { quotaStoreContract } from "../../core/test/contract/QuotaStoreContract.js"
import { MemoryQuotaStore } from "../src/index.js"

quotaStoreContract("memory", MemoryQuotaStore.layer)
