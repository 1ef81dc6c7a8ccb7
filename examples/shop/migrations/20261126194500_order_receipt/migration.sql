-- AlterTable
ALTER TABLE "Order" ADD COLUMN     "receiptId" UUID;
