causalbench workload --suite catalog --out cmp-catalog --compare-cupti
