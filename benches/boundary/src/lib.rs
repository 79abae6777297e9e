//! Both shapes do the same trivial work per record (count a byte), so the
//! difference measured is the cost of crossing the boundary.

// The generated export glue flattens the records' fields into arguments.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({ world: "boundary", path: "wit" });

struct Boundary;

fn work(payload: &[u8]) -> u32 {
    payload.iter().filter(|b| **b == b'"').count() as u32
}

impl Guest for Boundary {
    fn by_list(batch: Vec<Rec>) -> Vec<u32> {
        batch.iter().map(|r| work(&r.payload)).collect()
    }

    fn by_buffer(_path: String, payloads: Vec<u8>, ends: Vec<u32>, _offsets: Vec<u64>) -> Vec<u32> {
        let mut start = 0usize;
        ends.iter()
            .map(|end| {
                let end = *end as usize;
                let n = work(&payloads[start..end]);
                start = end;
                n
            })
            .collect()
    }
}

export!(Boundary);
